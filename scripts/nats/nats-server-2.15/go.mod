// Wrapper module: builds nats-server v2.15.3 (the newest stable release on the Go module
// proxy) from Go module downloads alone. Regenerate go.sum: GOFLAGS=-mod=mod go mod tidy
// (see ../README.md).
module kevents.local/nats/nats-server-2.15

go 1.26.0

require github.com/nats-io/nats-server/v2 v2.15.3

require (
	github.com/antithesishq/antithesis-sdk-go v0.9.0-default-no-op // indirect
	github.com/google/go-tpm v0.9.8 // indirect
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/minio/highwayhash v1.0.4 // indirect
	github.com/nats-io/jwt/v2 v2.8.3 // indirect
	github.com/nats-io/nkeys v0.4.17 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/time v0.16.0 // indirect
)
