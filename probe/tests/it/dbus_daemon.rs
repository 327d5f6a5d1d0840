//! The D-Bus client against the reference bus daemon: a private `dbus-daemon` per test, on a
//! socket in the test's own temp dir (never the host's buses).

use daqtune_probe::dbus::{Connection, DbusError, Message, Value};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

struct Daemon {
    child: Child,
    sock: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start a bus daemon, or `None` when dbus-daemon is not installed (scripts/test-all.sh
/// installs it as root; the reason is printed).
fn daemon() -> Option<Daemon> {
    let dir = tempfile::tempdir().expect("tmp");
    let sock = dir.path().join("bus");
    let conf = dir.path().join("bus.conf");
    std::fs::write(
        &conf,
        format!(
            r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path={}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
    <allow own="*"/>
    <allow user="*"/>
  </policy>
</busconfig>
"#,
            sock.display()
        ),
    )
    .expect("conf");
    let mut child = match Command::new("dbus-daemon")
        .arg(format!("--config-file={}", conf.display()))
        .args(["--nofork", "--nopidfile", "--print-address=1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            daqtune_testkit::skip(&format!(
                "dbus-daemon not runnable ({e}); apt-get install dbus-daemon"
            ));
            return None;
        }
    };
    // The daemon prints its address once it listens: no polling, no sleeps.
    let out = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(out)
        .read_line(&mut line)
        .expect("address line");
    assert!(line.contains("unix:path="), "{line}");
    Some(Daemon {
        child,
        sock,
        _dir: dir,
    })
}

#[test]
fn talks_to_the_reference_bus_daemon() {
    let Some(d) = daemon() else { return };
    let mut c = Connection::open(&d.sock, true, Duration::from_secs(10)).expect("connect + Hello");
    let id = c
        .call(Message::method_call(
            Some("org.freedesktop.DBus"),
            "/org/freedesktop/DBus",
            "org.freedesktop.DBus",
            "GetId",
            vec![],
        ))
        .expect("GetId");
    let id = id.body.first().and_then(Value::as_str).expect("a string");
    assert_eq!(id.len(), 32, "{id}");
    let names = c
        .call(Message::method_call(
            Some("org.freedesktop.DBus"),
            "/org/freedesktop/DBus",
            "org.freedesktop.DBus",
            "ListNames",
            vec![],
        ))
        .expect("ListNames");
    match names.body.first() {
        Some(Value::Array(sig, items)) => {
            assert_eq!(sig, "s");
            assert!(items
                .iter()
                .any(|v| v.as_str() == Some("org.freedesktop.DBus")));
        }
        other => panic!("ListNames returned {other:?}"),
    }
    // Properties of the bus itself: an a{sv} with arrays inside, as systemd's replies have.
    let props = c
        .call(Message::method_call(
            Some("org.freedesktop.DBus"),
            "/org/freedesktop/DBus",
            "org.freedesktop.DBus.Properties",
            "GetAll",
            vec![Value::Str("org.freedesktop.DBus".into())],
        ))
        .expect("GetAll");
    let p = daqtune_probe::systemd::properties(&props.body);
    assert!(p.iter().any(|(k, _)| k == "Features"), "{p:?}");
    // An error reply is an error with the peer's name and text.
    match c.call(Message::method_call(
        Some("org.freedesktop.DBus"),
        "/org/freedesktop/DBus",
        "org.freedesktop.DBus",
        "NoSuchMethod",
        vec![],
    )) {
        Err(DbusError::Remote { name, .. }) => {
            assert_eq!(name, "org.freedesktop.DBus.Error.UnknownMethod")
        }
        other => panic!("expected an error reply, got {other:?}"),
    }
}

#[test]
fn a_socket_nobody_listens_on_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tmp");
    match Connection::open(&dir.path().join("none"), true, Duration::from_secs(1)) {
        Err(DbusError::Connect { path, .. }) => assert!(path.ends_with("none")),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("connected to nothing"),
    }
}

/// A peer on `sock` that says OK to the authentication once `ready(bytes so far)` holds, never
/// answers anything else, and returns every byte it got when the client hangs up.
fn auth_only_peer(
    sock: &std::path::Path,
    ready: fn(&[u8]) -> bool,
) -> std::thread::JoinHandle<Vec<u8>> {
    use std::io::{Read, Write};
    let listener = std::os::unix::net::UnixListener::bind(sock).expect("bind");
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept");
        // A hang guard for a client that neither sends nor hangs up.
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let mut seen = Vec::new();
        let mut b = [0u8; 256];
        let mut answered = false;
        loop {
            match s.read(&mut b) {
                Ok(0) | Err(_) => return seen,
                Ok(n) => seen.extend_from_slice(&b[..n]),
            }
            if !answered && ready(&seen) {
                s.write_all(b"OK 0123456789abcdef0123456789abcdef\r\n")
                    .expect("auth reply");
                answered = true;
            }
        }
    })
}

fn holds(seen: &[u8], what: &[u8]) -> bool {
    seen.windows(what.len()).any(|w| w == what)
}

/// A peer that authenticates and then never answers (a hung or CPU-starved systemd): the first
/// call is a timeout that says so (not a bare EAGAIN), and the connection then refuses further
/// calls without waiting again, since a late reply could arrive half-read.
#[test]
fn a_peer_that_never_answers_times_out_once_and_the_connection_is_retired() {
    let dir = tempfile::tempdir().expect("tmp");
    let sock = dir.path().join("mute");
    let peer = auth_only_peer(&sock, |seen| holds(seen, b"\r\n"));
    let mut c = Connection::open(&sock, false, Duration::from_millis(300)).expect("connect");
    let ask = || {
        Message::method_call(
            None,
            "/org/freedesktop/systemd1",
            "org.freedesktop.systemd1.Manager",
            "GetUnit",
            vec![Value::Str("mnt-huge.mount".into())],
        )
    };
    match c.call(ask()) {
        Err(e @ DbusError::Timeout(_)) => assert!(e.to_string().contains("no answer within")),
        other => panic!("expected a timeout, got {other:?}"),
    }
    match c.call(ask()) {
        Err(DbusError::Unusable(why)) => assert!(why.contains("no answer within"), "{why}"),
        other => panic!("expected the connection to refuse, got {other:?}"),
    }
    drop(c);
    let seen = peer.join().expect("peer thread");
    // Exactly one method call reached the peer: the second was refused before it was sent.
    let calls = seen.windows(7).filter(|w| w == b"GetUnit").count();
    assert_eq!(calls, 1, "{}", String::from_utf8_lossy(&seen));
}

/// BEGIN travels with AUTH, before the server's OK, as sd-bus's own client sends it (systemd's
/// server left a first call unanswered when BEGIN and that call reached it in one read). This
/// peer answers OK only once it has BEGIN: a client that waits for OK before sending BEGIN
/// never gets it, and `open` fails.
#[test]
fn begin_is_sent_with_auth_not_with_the_first_call() {
    let dir = tempfile::tempdir().expect("tmp");
    let sock = dir.path().join("strict");
    let peer = auth_only_peer(&sock, |seen| holds(seen, b"BEGIN\r\n"));
    let opened = Connection::open(&sock, false, Duration::from_secs(2));
    assert!(opened.is_ok(), "{:?}", opened.err());
    drop(opened);
    let seen = peer.join().expect("peer");
    assert!(seen.starts_with(b"\0AUTH EXTERNAL "), "{seen:?}");
}
