//! Shared by the integration tests: kube clients built from a target's kubeconfig with kube's
//! own config loading, and the suites' sink trait for `KubeSink` (a newtype: neither the trait
//! nor the type is local to a test crate).

#![allow(dead_code)] // each test binary uses part of it

use kevents_core::events_v1::{self};
use kevents_core::{Event, EventSink, SinkError, SinkFuture};
use kevents_kube::KubeSink;
use kevents_testkit::conformance::SuiteSink;
use kevents_testkit::{Identity, Target};
use kube::config::{KubeConfigOptions, Kubeconfig};

/// A `kube::Client` from kubeconfig YAML, with kube's own loader (`Kubeconfig::from_yaml`,
/// `Config::from_custom_kubeconfig`, `Client::try_from`). `default_retry` is kube's 429/503/504
/// retry layer.
pub async fn kube_client(yaml: &str, default_retry: bool) -> kube::Client {
    let kubeconfig = Kubeconfig::from_yaml(yaml).expect("kubeconfig parses");
    let mut config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .expect("kube config");
    config.default_retry = default_retry;
    kube::Client::try_from(config).expect("kube client")
}

/// The client of one identity of a target.
pub async fn client_for<S>(t: &Target<S>, who: Identity) -> kube::Client {
    kube_client(&t.kubeconfig(who).expect("kubeconfig"), true).await
}

/// `KubeSink` as a suite sink.
#[derive(Clone, Debug)]
pub struct Via(pub KubeSink);

impl EventSink for Via {
    fn create(&self, event: &Event) -> SinkFuture {
        self.0.create(event)
    }
    fn patch(&self, event: &Event, patch: &[u8]) -> SinkFuture {
        self.0.patch(event, patch)
    }
}

impl kevents_core::events_v1::EventSink for Via {
    fn create_events_v1(&self, event: &events_v1::Event) -> kevents_core::events_v1::SinkFuture {
        self.0.create_events_v1(event)
    }
    fn patch_events_v1(
        &self,
        event: &events_v1::Event,
        patch: &[u8],
    ) -> kevents_core::events_v1::SinkFuture {
        self.0.patch_events_v1(event, patch)
    }
}

impl SuiteSink for Via {
    async fn get_event(&self, namespace: &str, name: &str) -> Result<Event, SinkError> {
        self.0.requests().get_event(namespace, name).await
    }
    async fn delete_event(&self, namespace: &str, name: &str) -> Result<(), SinkError> {
        self.0.requests().delete_event(namespace, name).await
    }
    async fn list_events(&self, namespace: &str) -> Result<Vec<Event>, String> {
        self.0
            .requests()
            .list_events(namespace)
            .await
            .map_err(|e| e.to_string())
    }
    async fn get_event_v1(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<events_v1::Event, SinkError> {
        self.0
            .requests()
            .events_v1()
            .get_event(namespace, name)
            .await
    }
    async fn list_events_v1(&self, namespace: &str) -> Result<Vec<events_v1::Event>, String> {
        self.0
            .requests()
            .events_v1()
            .list_events(namespace)
            .await
            .map_err(|e| e.to_string())
    }
    async fn events_v1_served(&self) -> Result<bool, SinkError> {
        self.0.requests().events_v1_served().await
    }
}

/// The target with its sinks replaced by `KubeSink`s over kube clients built from its
/// kubeconfigs.
pub async fn through_kube<S>(t: Target<S>) -> Target<Via> {
    let admin = Via(KubeSink::new(client_for(&t, Identity::Admin).await));
    let nobody = Via(KubeSink::new(client_for(&t, Identity::Nobody).await));
    t.with_sinks(admin, nobody)
}

/// Starts the real apiserver or panics (the tests calling it are wrapped in
/// `real_apiserver_tests!`, so they only run when it is provisioned or required).
pub async fn real_target() -> Target {
    match Target::real().await {
        Ok(Some(t)) => t,
        Ok(None) => panic!("kube-apiserver is not provisioned (see above)"),
        Err(e) => panic!("{e}"),
    }
}
