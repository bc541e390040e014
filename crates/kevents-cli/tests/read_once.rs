//! Inputs a user names are read once (issue 36): a kubeconfig given as `/dev/stdin` fed from
//! a pipe, as a FIFO with a one-shot writer, or as a process substitution (`<(cat file)`)
//! works for every command that takes one (`doctor`, `demo`, `bench apiserver`), and so does
//! a kubeconfig whose `tokenFile` is a FIFO. Before, the kubeconfig was read twice (a secret
//! scan, then the load) and the token file twice (a check, then the first request): the
//! second read found nothing, or waited for a writer that was gone.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::thread::JoinHandle;

use kevents_sim::{SimConfig, Simulator};

/// The commands that take `--kubeconfig`, each with flags that keep its run short.
const COMMANDS: [&[&str]; 3] = [
    &["doctor", "-n", "default"],
    &["demo", "--pace-ms", "0", "--namespace", "default"],
    &["bench", "apiserver", "--namespace", "default"],
];

fn kevents() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kevents"))
}

fn check(what: &str, out: Output) {
    assert!(
        out.status.success(),
        "{what}: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn sim() -> kevents_sim::SimHandle {
    Simulator::start_blocking(SimConfig::like_apiserver()).expect("simulator")
}

/// A FIFO at `dir/name` and a writer that opens it once, writes `content` and closes it:
/// a second reader would wait for a writer that never comes.
fn one_shot_fifo(dir: &Path, name: &str, content: String) -> (PathBuf, JoinHandle<()>) {
    let path = dir.join(name);
    nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    let p = path.clone();
    let writer = std::thread::spawn(move || {
        // Blocks until a reader opens it; then one write and the end of the file.
        if let Ok(mut f) = std::fs::OpenOptions::new().write(true).open(&p) {
            let _ = f.write_all(content.as_bytes());
        }
    });
    (path, writer)
}

/// Opens `fifo` for writing without a reader so that a writer thread blocked in `open`
/// returns (when the command under test never read it).
fn unblock(fifo: &Path, writer: JoinHandle<()>) {
    let _ = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(fifo);
    let _ = writer.join();
}

#[test]
fn a_kubeconfig_piped_on_stdin_is_read_once() {
    for args in COMMANDS {
        let sim = sim();
        let yaml = sim.kubeconfig(sim.admin_token(), "default");
        let mut child = kevents()
            .args(args)
            .args(["--kubeconfig", "/dev/stdin"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("running kevents");
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(yaml.as_bytes())
            .expect("writing the kubeconfig");
        drop(stdin);
        check(
            &format!("{args:?} --kubeconfig /dev/stdin (a pipe)"),
            child.wait_with_output().expect("waiting"),
        );
    }
}

#[test]
fn a_kubeconfig_fifo_with_a_one_shot_writer_is_read_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (i, args) in COMMANDS.iter().enumerate() {
        let sim = sim();
        let (fifo, writer) = one_shot_fifo(
            dir.path(),
            &format!("kubeconfig-{i}"),
            sim.kubeconfig(sim.admin_token(), "default"),
        );
        let out = kevents()
            .args(*args)
            .arg("--kubeconfig")
            .arg(&fifo)
            .output()
            .expect("running kevents");
        unblock(&fifo, writer);
        check(&format!("{args:?} --kubeconfig FIFO"), out);
    }
}

#[test]
fn a_kubeconfig_given_by_process_substitution_is_read_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("kubeconfig");
    for args in COMMANDS {
        let sim = sim();
        std::fs::write(&file, sim.kubeconfig(sim.admin_token(), "default")).expect("write");
        let script = format!("exec \"$0\" {} --kubeconfig <(cat \"$1\")", args.join(" "));
        let out = Command::new("bash")
            .arg("-c")
            .arg(script)
            .arg(env!("CARGO_BIN_EXE_kevents"))
            .arg(&file)
            .output()
            .expect("running bash");
        check(&format!("{args:?} --kubeconfig <(cat file)"), out);
    }
}

#[test]
fn a_token_file_that_is_a_fifo_is_read_once() {
    let sim = sim();
    let dir = tempfile::tempdir().expect("tempdir");
    let token = sim.admin_token().expect("the simulator's admin token");
    let (fifo, writer) = one_shot_fifo(dir.path(), "token", format!("{token}\n"));
    let yaml = sim.kubeconfig(Some(token), "default").replace(
        &format!("token: {token}"),
        &format!("tokenFile: {}", fifo.display()),
    );
    assert!(yaml.contains("tokenFile: "), "{yaml}");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, yaml).expect("write");
    let out = kevents()
        .args(["doctor", "-n", "default", "--kubeconfig"])
        .arg(&kubeconfig)
        .output()
        .expect("running kevents");
    unblock(&fifo, writer);
    check("doctor with a FIFO tokenFile", out);
}
