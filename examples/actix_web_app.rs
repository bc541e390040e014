//! An actix-web service whose handlers record events through one shared `Recorder` handle.
//!
//! ```sh
//! cargo run --example actix_web_app                 # serves until Ctrl-C, prints its URL
//! cargo run --example actix_web_app -- --self-test  # calls itself a few times, prints, exits
//! cargo run --example actix_web_app -- --kubeconfig FILE   # a real cluster instead
//! ```
//!
//! By default the events go to the embedded apiserver simulator, so it runs anywhere.
//! Endpoints: `POST /deployments/{name}/scale/{replicas}` (a Normal `ScalingReplicaSet`),
//! `POST /pods/{name}/crash` (a Warning `BackOff`; repeats become one event with a count),
//! `GET /events` (what the apiserver stores, one line each).

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use actix_web::{App, HttpResponse, HttpServer, web};
use kevents::http::{HttpConfig, HttpSink};
use kevents::{EventSource, EventType, ObjectReference, Pipeline, Recorder, SinkOptions, eventf};
use kevents_sim::{SimConfig, Simulator};

const NAMESPACE: &str = "default";

/// What every handler shares: the recorder (cheap to clone, never blocks) and the sink for
/// reading events back.
#[derive(Clone)]
struct AppState {
    recorder: Recorder,
    sink: HttpSink,
}

async fn scale(state: web::Data<AppState>, path: web::Path<(String, u32)>) -> HttpResponse {
    let (name, replicas) = path.into_inner();
    let deploy = ObjectReference::new("apps/v1", "Deployment", NAMESPACE, &name);
    match eventf!(
        state.recorder,
        &deploy,
        EventType::Normal,
        "ScalingReplicaSet",
        "Scaled replica set {}-7d4c9b6f5 to {}",
        name,
        replicas
    ) {
        Ok(emit) => {
            HttpResponse::Accepted().body(format!("scaled {name} to {replicas} (event {emit:?})\n"))
        }
        Err(e) => HttpResponse::BadRequest().body(format!("{e}\n")),
    }
}

async fn crash(state: web::Data<AppState>, name: web::Path<String>) -> HttpResponse {
    let pod = ObjectReference::new("v1", "Pod", NAMESPACE, name.as_str());
    match state.recorder.event(
        &pod,
        EventType::Warning,
        "BackOff",
        "Back-off restarting failed container",
    ) {
        Ok(emit) => HttpResponse::Accepted().body(format!("pod {name} crashed (event {emit:?})\n")),
        Err(e) => HttpResponse::BadRequest().body(format!("{e}\n")),
    }
}

async fn events(state: web::Data<AppState>) -> HttpResponse {
    match state.sink.requests().list_events(NAMESPACE).await {
        Ok(list) => {
            let mut body = String::new();
            for e in list {
                body.push_str(&format!(
                    "{:<8} {:<18} {}/{} x{} {}\n",
                    e.type_,
                    e.reason,
                    e.involved_object.kind,
                    e.involved_object.name,
                    e.count,
                    e.message
                ));
            }
            HttpResponse::Ok().body(body)
        }
        Err(e) => HttpResponse::BadGateway().body(format!("apiserver: {e}\n")),
    }
}

/// One HTTP/1.1 request to ourselves (blocking; run off the async threads).
fn call(addr: SocketAddr, method: &str, path: &str) -> std::io::Result<String> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    s.read_to_string(&mut response)?;
    Ok(response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or(response))
}

#[actix_web::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut self_test = false;
    let mut kubeconfig: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--self-test" => self_test = true,
            "--kubeconfig" => {
                kubeconfig = Some(args.next().ok_or("--kubeconfig needs a file")?.into())
            }
            other => return Err(format!(
                "unknown argument {other:?}; usage: actix_web_app [--self-test] [--kubeconfig FILE]"
            )
            .into()),
        }
    }

    // The apiserver: a real cluster, or the embedded simulator.
    let (sink, sim) = match kubeconfig {
        Some(path) => (
            HttpSink::new(HttpConfig::from_kubeconfig(Some(&path), None).await?)?,
            None,
        ),
        None => {
            let sim = Simulator::start(SimConfig::default()).await?;
            let sink = HttpSink::new(
                HttpConfig::from_kubeconfig_yaml(&sim.kubeconfig(None, NAMESPACE), None).await?,
            )?;
            println!("apiserver: embedded simulator at {}", sim.url());
            (sink, Some(sim))
        }
    };

    let pipeline = Pipeline::builder(EventSource::new("web-frontend", "localhost"))
        .sink("apiserver", sink.clone(), SinkOptions::default())
        .start();
    let state = AppState {
        recorder: pipeline.recorder(),
        sink,
    };

    let server = HttpServer::new(move || {
        App::new()
            .app_data(web::Data::new(state.clone()))
            .route(
                "/deployments/{name}/scale/{replicas}",
                web::post().to(scale),
            )
            .route("/pods/{name}/crash", web::post().to(crash))
            .route("/events", web::get().to(events))
    })
    .workers(2)
    .bind(("127.0.0.1", 0))?;
    let addr = server.addrs()[0];
    let server = server.run();
    let handle = server.handle();
    println!("listening on http://{addr}");
    println!("  curl -X POST http://{addr}/pods/web-1/crash");
    println!("  curl -X POST http://{addr}/deployments/web/scale/5");
    println!("  curl http://{addr}/events");

    if self_test {
        let running = actix_web::rt::spawn(server);
        let calls = actix_web::rt::task::spawn_blocking(move || -> std::io::Result<Vec<String>> {
            let mut out = Vec::new();
            for _ in 0..3 {
                out.push(call(addr, "POST", "/pods/web-1/crash")?);
            }
            out.push(call(addr, "POST", "/deployments/web/scale/5")?);
            // Give the pipeline a moment to write, then read back.
            std::thread::sleep(Duration::from_millis(500));
            out.push(call(addr, "GET", "/events")?);
            Ok(out)
        })
        .await??;
        for c in calls {
            print!("{c}");
        }
        handle.stop(true).await;
        running.await??;
    } else {
        server.await?;
    }

    let report = pipeline.shutdown(Duration::from_secs(10)).await;
    let s = &report.stats.sinks[0];
    println!(
        "shutdown: completed {}, created {}, patched {}, failed {}",
        report.completed,
        s.created,
        s.patched,
        s.failed()
    );
    if let Some(sim) = sim {
        sim.shutdown().await;
    }
    Ok(())
}
