//! The HTTP side: the accept loop with its refusable listener and per-connection reset
//! control (here); client certificates (`client_cert.rs`); one request's authentication,
//! authorisation and fault injection (`handle.rs`, `injected.rs`); the routes
//! (`route.rs`); the answers they share (`replies.rs`).

mod client_cert;
mod handle;
mod injected;
mod replies;
mod route;
mod shared;

pub(crate) use client_cert::AnyClientCert;
use handle::handle;
use shared::ConnCtl;
pub(crate) use shared::{Shared, User, lock};

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{Notify, mpsc, oneshot, watch};

/// Commands from the handle to the server thread.
pub(crate) enum Command {
    Refuse {
        duration: Option<Duration>,
        done: oneshot::Sender<()>,
    },
    Accept {
        done: oneshot::Sender<()>,
    },
    Shutdown {
        done: oneshot::Sender<()>,
    },
}

pub(crate) fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

/// The accept loop; returns when told to shut down.
pub(crate) async fn run(
    shared: Arc<Shared>,
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    mut commands: mpsc::UnboundedReceiver<Command>,
) -> Option<oneshot::Sender<()>> {
    let addr = match listener.local_addr() {
        Ok(a) => a,
        Err(_) => return None,
    };
    let mut listener = Some(listener);
    let mut rebind_at: Option<tokio::time::Instant> = None;
    let (kill_all, _) = watch::channel(0u64);
    loop {
        enum Step {
            Accepted(std::io::Result<(TcpStream, SocketAddr)>),
            Rebind,
            Cmd(Option<Command>),
        }
        let step = tokio::select! {
            r = async {
                match &listener {
                    Some(l) => l.accept().await,
                    None => std::future::pending().await,
                }
            } => Step::Accepted(r),
            () = async {
                match rebind_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => Step::Rebind,
            c = commands.recv() => Step::Cmd(c),
        };
        match step {
            Step::Accepted(Ok((stream, _))) => {
                lock(&shared.stats).connections += 1;
                tokio::spawn(serve_connection(
                    shared.clone(),
                    stream,
                    tls.clone(),
                    kill_all.subscribe(),
                ));
            }
            Step::Accepted(Err(e)) => {
                tracing::warn!(error = %e, "simulator accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Step::Rebind => match bind(addr) {
                Ok(l) => {
                    listener = Some(l);
                    rebind_at = None;
                }
                Err(e) => {
                    tracing::warn!(error = %e, %addr, "simulator cannot re-bind yet");
                    rebind_at = Some(tokio::time::Instant::now() + Duration::from_millis(100));
                }
            },
            Step::Cmd(Some(Command::Refuse { duration, done })) => {
                listener = None;
                kill_all.send_modify(|g| *g += 1);
                rebind_at = duration.map(|d| tokio::time::Instant::now() + d);
                let _ = done.send(());
            }
            Step::Cmd(Some(Command::Accept { done })) => {
                if listener.is_none() {
                    rebind_at = None;
                    loop {
                        match bind(addr) {
                            Ok(l) => {
                                listener = Some(l);
                                break;
                            }
                            Err(e) => {
                                tracing::warn!(error = %e, %addr, "simulator cannot re-bind yet");
                                tokio::time::sleep(Duration::from_millis(50)).await;
                            }
                        }
                    }
                }
                let _ = done.send(());
            }
            Step::Cmd(Some(Command::Shutdown { done })) => {
                drop(listener.take());
                kill_all.send_modify(|g| *g += 1);
                return Some(done);
            }
            Step::Cmd(None) => {
                kill_all.send_modify(|g| *g += 1);
                return None;
            }
        }
    }
}

async fn serve_connection(
    shared: Arc<Shared>,
    stream: TcpStream,
    tls: Option<tokio_rustls::TlsAcceptor>,
    mut kill_all: watch::Receiver<u64>,
) {
    let Ok(std_stream) = stream.into_std() else {
        return;
    };
    let Ok(dup) = std_stream.try_clone() else {
        return;
    };
    let Ok(stream) = TcpStream::from_std(std_stream) else {
        return;
    };
    let _ = stream.set_nodelay(true);
    if lock(&shared.faults).unresponsive {
        hold_unanswered(stream, &mut kill_all).await;
        return;
    }
    let ctl = Arc::new(ConnCtl {
        sock: dup,
        kill: Notify::new(),
    });
    let svc_ctl = ctl.clone();
    let cert_shared = shared.clone();
    let make_service = move |cert_user: Option<User>| {
        service_fn(move |req| {
            let shared = shared.clone();
            let ctl = svc_ctl.clone();
            let cert_user = cert_user.clone();
            async move { Ok::<_, Infallible>(handle(shared, ctl, req, cert_user).await) }
        })
    };
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    let serve = async {
        match tls {
            Some(acceptor) => match acceptor.accept(stream).await {
                Ok(tls_stream) => {
                    let cert_user = tls_stream
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|c| c.first())
                        .and_then(|der| {
                            lock(&cert_shared.cert_users)
                                .iter()
                                .find(|(d, _)| d.as_slice() == der.as_ref())
                                .map(|(_, u)| u.clone())
                        });
                    let service = make_service(cert_user);
                    let _ = builder
                        .serve_connection(TokioIo::new(tls_stream), service)
                        .await;
                }
                Err(e) => tracing::debug!(error = %e, "simulator TLS handshake failed"),
            },
            None => {
                let _ = builder
                    .serve_connection(TokioIo::new(stream), make_service(None))
                    .await;
            }
        }
    };
    tokio::select! {
        () = serve => {}
        () = ctl.kill.notified() => {}
        _ = kill_all.changed() => ctl.reset(),
    }
}

/// An accepted connection that is never answered: what the client sends is read and thrown
/// away (no TLS handshake, no HTTP) until it closes the connection or the server stops.
async fn hold_unanswered(mut stream: TcpStream, kill_all: &mut watch::Receiver<u64>) {
    use tokio::io::AsyncReadExt as _;
    let mut buf = [0u8; 4096];
    loop {
        tokio::select! {
            r = stream.read(&mut buf) => match r {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            },
            _ = kill_all.changed() => return,
        }
    }
}
