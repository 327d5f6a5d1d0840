//! deploy/ against the engines' own tools, from PyPI in a virtualenv made for this test run:
//! the Ansible role run by ansible-playbook against localhost on copies of a fixture root
//! (check mode, apply, idempotence, a failing gate, the one-host-at-a-time qualify playbook,
//! revert), ansible-lint, and the Kubernetes manifests against the OpenAPI schemas that
//! kubernetes-validate ships (validated with networking cut off where possible).

use crate::fleet_support;

use crate::testroot;

use fleet_support::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn ansible_dir() -> PathBuf {
    repo().join("deploy/ansible")
}

/// ansible-playbook with everything Ansible keeps (~/.ansible, temp files, retry files)
/// inside `work`.
fn playbook(venv: &Venv, work: &Path, args: &[&str]) -> Output {
    let cfg = work.join("ansible.cfg");
    if !cfg.exists() {
        std::fs::write(&cfg, "[defaults]\n").expect("cfg");
    }
    Command::new(venv.bin.join("ansible-playbook"))
        .args(args)
        .env("ANSIBLE_CONFIG", &cfg)
        .env("ANSIBLE_HOME", work.join("ansible-home"))
        .env("ANSIBLE_LOCAL_TEMP", work.join("ansible-tmp"))
        .env("ANSIBLE_REMOTE_TEMP", work.join("ansible-remote-tmp"))
        .env("ANSIBLE_ROLES_PATH", ansible_dir().join("roles"))
        .env("ANSIBLE_COLLECTIONS_PATH", work.join("collections"))
        .env("ANSIBLE_NOCOLOR", "1")
        .env("ANSIBLE_FORCE_COLOR", "0")
        .env("ANSIBLE_RETRY_FILES_ENABLED", "0")
        .env("ANSIBLE_PIPELINING", "1")
        .env("ANSIBLE_DEPRECATION_WARNINGS", "0")
        .env("NO_COLOR", "1")
        .env_remove("DAQTUNE_ROOT")
        .env_remove("DAQTUNE_PROFILE")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run ansible-playbook")
}

/// The PLAY RECAP counters of `host`.
fn recap(out: &Output, host: &str) -> BTreeMap<String, u32> {
    let t = String::from_utf8_lossy(&out.stdout);
    let line = t
        .lines()
        .rev()
        .find(|l| l.starts_with(host) && l.contains(" ok="))
        .unwrap_or_else(|| panic!("no recap for {host}:\n{}", text(out)));
    line.split_whitespace()
        .filter_map(|w| w.split_once('='))
        .map(|(k, v)| (k.to_string(), v.parse().expect("count")))
        .collect()
}

fn site() -> String {
    ansible_dir()
        .join("playbooks/site.yml")
        .display()
        .to_string()
}

/// The host root with the daqtune state directory left out (the journal stays after a
/// revert, by design) and, where the root had none before, its parents.
fn without_state(
    snap: BTreeMap<String, String>,
    before: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut skip = vec!["var/lib/daqtune"];
    for p in ["var/lib", "var"] {
        if !before.contains_key(p) {
            skip.push(p);
        }
    }
    snap.into_iter()
        .filter(|(k, _)| {
            !skip
                .iter()
                .any(|s| k == s || k.starts_with(&format!("{s}/")))
        })
        .collect()
}

#[test]
fn ansible_role_on_a_fixture_root() {
    let venv = match venv() {
        Ok(v) => v,
        Err(why) => return skip("the Ansible role test", &why),
    };
    let t0 = std::time::Instant::now();
    let d = tempfile::tempdir().expect("tmp");
    let w = d.path();
    let fixture = fixtures().join("igx-untuned");
    let root_a = w.join("root-a");
    let root_b = w.join("root-b");
    testroot::copy_tree(&fixture, &root_a);
    testroot::copy_tree(&fixture, &root_b);
    install_stub(&root_a);
    install_stub(&root_b);
    // These hosts have no RDMA device nodes (rdma-core's udev rules never ran): nic.driver
    // fails, and apply cannot fix it (under a root it makes nvidia_peermem pass, so that is
    // no failure here). This lab runs the socket data path only and waives it, so the gate
    // passes on root A; root B is judged by the stock profile, whose gate fails on exactly
    // that.
    for root in [&root_a, &root_b] {
        std::fs::remove_dir_all(root.join("dev/infiniband")).expect("rm dev/infiniband");
    }
    let lab = w.join("lab-igx.yaml");
    std::fs::write(
        &lab,
        "name: lab-igx\nextends: igx-orin\nwaivers:\n  - check: nic.driver\n    until: \"2099-12-31\"\n    reason: socket data path only, no RDMA device nodes in this lab (LAB-1)\n",
    )
    .expect("profile");
    let python = venv.bin.join("python3");
    let py = python.display();
    let inventory = w.join("inventory");
    std::fs::write(
        &inventory,
        format!("[daq]\nlocalhost ansible_connection=local ansible_python_interpreter={py}\n"),
    )
    .expect("inventory");
    let vars = |root: &Path, profile: &str, tag: &str| -> PathBuf {
        let p = w.join(format!("vars-{tag}.json"));
        let v = serde_json::json!({
            "daqtune_become": false,
            "daqtune_bin": bin(),
            "daqtune_root": root,
            "daqtune_profile": profile,
            "daqtune_qualify_dir": w.join(format!("qualify-{tag}")),
            "daqtune_junit_dest": w.join(format!("junit-{tag}")),
            "daqtune_facts_dir": w.join(format!("facts-{tag}")),
        });
        std::fs::write(&p, v.to_string()).expect("vars");
        p
    };
    let va = vars(&root_a, lab.to_str().expect("utf8"), "a");
    let va_arg = format!("@{}", va.display());
    let inv = inventory.to_str().expect("utf8");
    let site_yml = site();
    let play = |extra: &[&str]| {
        let mut args = vec!["-i", inv, "-e", va_arg.as_str()];
        args.extend_from_slice(extra);
        args.push(site_yml.as_str());
        playbook(venv, w, &args)
    };
    let before = testroot::snapshot(&root_a, &[]);

    // Check mode: the plan reports the change, nothing on the root changes.
    let o = play(&["--check"]);
    assert_eq!(o.status.code(), Some(0), "--check: {}", text(&o));
    let r = recap(&o, "localhost");
    assert!(r["changed"] >= 1 && r["failed"] == 0, "--check: {r:?}");
    let d0 = testroot::diff_snapshots(&before, &testroot::snapshot(&root_a, &[]));
    assert!(d0.is_empty(), "--check changed the root: {d0:#?}");

    // First run: applies, says what waits for a reboot (and does not reboot a root), passes.
    let o = play(&[]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "first run: {out}");
    let r = recap(&o, "localhost");
    assert!(r["changed"] >= 2, "first run: {r:?}\n{out}");
    // Only the kernel line waits for a boot: the pools are grown and hugetlbfs is mounted at
    // run time (on a root: its nr/free_hugepages and /proc/mounts), so hugepages passes now.
    assert!(
        out.contains("reboot needed for kernel.cmdline (not rebooted: daqtune_root is set)"),
        "{out}"
    );
    assert!(
        out.contains("daqtune qualify --level 1 passed on localhost"),
        "{out}"
    );
    let after = testroot::snapshot(&root_a, &[]);
    assert!(
        after.contains_key("etc/default/grub.d/99-daqtune.cfg"),
        "apply wrote the drop-in"
    );
    assert_ne!(before, after);
    let junit = std::fs::read_to_string(w.join("junit-a/localhost.xml")).expect("junit fetched");
    let doc = roxmltree::Document::parse(&junit).expect("JUnit XML");
    assert_eq!(doc.root_element().tag_name().name(), "testsuites");
    let facts: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(w.join("facts-a/daqtune.fact")).expect("facts"),
    )
    .expect("facts json");
    assert_eq!(facts["profile"], "lab-igx");
    assert_eq!(facts["run"]["gate"]["passed"], true);
    assert!(
        out.contains("daqtune on localhost: profile lab-igx, gate pass"),
        "{out}"
    );

    // Second run: nothing to do.
    let o = play(&[]);
    assert_eq!(o.status.code(), Some(0), "second run: {}", text(&o));
    let r = recap(&o, "localhost");
    assert_eq!(r["changed"], 0, "second run: {r:?}\n{}", text(&o));
    let d2 = testroot::diff_snapshots(&after, &testroot::snapshot(&root_a, &[]));
    assert!(d2.is_empty(), "second run changed: {d2:#?}");

    // A failing gate fails the play and names the check; the JUnit is fetched anyway.
    let vb = vars(&root_b, "igx-orin", "b");
    let o = playbook(
        venv,
        w,
        &["-i", inv, "-e", &format!("@{}", vb.display()), &site()],
    );
    let out = text(&o);
    assert_ne!(o.status.code(), Some(0), "{out}");
    assert_eq!(recap(&o, "localhost")["failed"], 1, "{out}");
    assert!(
        out.contains(
            "daqtune qualify --level 1 failed on localhost: nic.driver (/dev/infiniband): fail: \
             no /dev/infiniband/uverbs* device nodes"
        ),
        "{out}"
    );
    assert!(w.join("junit-b/localhost.xml").is_file());

    // The fleet playbook: both hosts qualified one after the other, the failing one first,
    // both JUnit files collected, nothing applied.
    let inv2 = w.join("inventory-two");
    std::fs::write(
        &inv2,
        format!(
            "[daq]\nh1 ansible_connection=local ansible_python_interpreter={py} daqtune_root={} daqtune_profile=igx-orin\nh2 ansible_connection=local ansible_python_interpreter={py} daqtune_root={} daqtune_profile={}\n",
            root_b.display(),
            root_a.display(),
            lab.display()
        ),
    )
    .expect("inventory");
    let v2 = w.join("vars-two.json");
    std::fs::write(
        &v2,
        serde_json::json!({
            "daqtune_become": false, "daqtune_bin": bin(), "daqtune_level": 1,
            "daqtune_junit_dest": w.join("junit-fleet"), "daqtune_facts": false,
            "daqtune_qualify_dir": w.join("qualify-fleet-{{ inventory_hostname }}"),
        })
        .to_string(),
    )
    .expect("vars");
    let o = playbook(
        venv,
        w,
        &[
            "-i",
            inv2.to_str().expect("utf8"),
            "-e",
            &format!("@{}", v2.display()),
            ansible_dir()
                .join("playbooks/qualify.yml")
                .to_str()
                .expect("utf8"),
        ],
    );
    let out = text(&o);
    assert_ne!(o.status.code(), Some(0), "{out}");
    assert_eq!(recap(&o, "h1")["failed"], 1, "{out}");
    assert_eq!(recap(&o, "h2")["failed"], 0, "{out}");
    assert!(
        out.find("failed on h1").expect("h1 result") < out.find("passed on h2").expect("h2"),
        "one host after the other: {out}"
    );
    for h in ["h1", "h2"] {
        let x = std::fs::read_to_string(w.join(format!("junit-fleet/{h}.xml"))).expect(h);
        roxmltree::Document::parse(&x).expect("JUnit XML");
    }
    let d3 = testroot::diff_snapshots(&after, &testroot::snapshot(&root_a, &[]));
    assert!(
        d3.is_empty(),
        "the qualify playbook changed root A: {d3:#?}"
    );

    // revert restores root A byte for byte (the journal stays), once.
    let o = play(&["--tags", "revert"]);
    assert_eq!(o.status.code(), Some(0), "revert: {}", text(&o));
    assert_eq!(recap(&o, "localhost")["changed"], 1, "{}", text(&o));
    let now = without_state(testroot::snapshot(&root_a, &[]), &before);
    let d4 = testroot::diff_snapshots(&before, &now);
    assert!(d4.is_empty(), "revert left differences: {d4:#?}");
    let o = play(&["--tags", "revert"]);
    assert_eq!(recap(&o, "localhost")["changed"], 0, "{}", text(&o));
    eprintln!(
        "fleet: Ansible role runs took {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}

/// A DAQIRI configuration given to the role is copied and drives apply; in check mode,
/// before it is on the host, the role says so instead of planning without it.
#[test]
fn ansible_role_with_a_daqiri_configuration() {
    let venv = match venv() {
        Ok(v) => v,
        Err(why) => return skip("the Ansible role test with a configuration", &why),
    };
    let d = tempfile::tempdir().expect("tmp");
    let w = d.path();
    let root = w.join("root");
    testroot::copy_tree(&fixtures().join("igx-untuned"), &root);
    install_stub(&root);
    let inventory = w.join("inventory");
    std::fs::write(
        &inventory,
        format!(
            "[daq]\nlocalhost ansible_connection=local ansible_python_interpreter={}\n",
            venv.bin.join("python3").display()
        ),
    )
    .expect("inventory");
    let dest = w.join("etc/daqtune/daqiri.yaml");
    let vars = w.join("vars.json");
    std::fs::write(
        &vars,
        serde_json::json!({
            "daqtune_become": false, "daqtune_bin": bin(), "daqtune_root": root,
            "daqtune_profile": "igx-orin",
            "daqtune_config": repo().join("tests/configs/rdma_igx.yaml"),
            "daqtune_config_dest": dest,
        })
        .to_string(),
    )
    .expect("vars");
    let inv = inventory.to_str().expect("utf8");
    let va = format!("@{}", vars.display());
    let play = |extra: &[&str]| {
        let mut a = vec!["-i", inv, "-e", va.as_str(), "--tags", "tune"];
        a.extend_from_slice(extra);
        let site = site();
        a.push(&site);
        playbook(venv, w, &a)
    };
    let before = testroot::snapshot(&root, &[]);
    let o = play(&["--check"]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(
        out.contains("check mode cannot plan from") && !dest.exists(),
        "{out}"
    );
    assert!(testroot::diff_snapshots(&before, &testroot::snapshot(&root, &[])).is_empty());
    let o = play(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(dest.is_file());
    // The cores come from the configuration's queues and workers; it has no hugepage
    // region, so the kernel arguments reserve none (the profile alone would reserve 4 x 1G).
    let dropin = read(&root.join("etc/default/grub.d/99-daqtune.cfg"));
    assert!(
        dropin.contains("isolcpus=9-11") && !dropin.contains("hugepages="),
        "{dropin}"
    );
    let o = play(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(recap(&o, "localhost")["changed"], 0, "{}", text(&o));
}

#[test]
fn ansible_lint_and_syntax_check() {
    let venv = match venv() {
        Ok(v) => v,
        Err(why) => return skip("ansible-lint", &why),
    };
    let d = tempfile::tempdir().expect("tmp");
    // Lint a copy: ansible-lint keeps a cache (.ansible/) in the project it reads.
    let project = d.path().join("ansible");
    testroot::copy_tree(&ansible_dir(), &project);
    let lint = |dir: &Path| {
        Command::new(venv.bin.join("ansible-lint"))
            .args(["--offline", "--profile", "production", "--nocolor"])
            .current_dir(dir)
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    venv.bin.display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            )
            .env("HOME", d.path())
            .env("XDG_CACHE_HOME", d.path().join("cache"))
            .env("ANSIBLE_HOME", d.path().join("ansible-home"))
            .env("ANSIBLE_LOCAL_TEMP", d.path().join("ansible-tmp"))
            .env("NO_COLOR", "1")
            .output()
            .expect("ansible-lint")
    };
    let o = lint(&project);
    assert_eq!(o.status.code(), Some(0), "ansible-lint: {}", text(&o));
    for pb in ["site.yml", "qualify.yml"] {
        let o = playbook(
            venv,
            d.path(),
            &[
                "--syntax-check",
                "-i",
                "localhost,",
                project.join("playbooks").join(pb).to_str().expect("utf8"),
            ],
        );
        assert_eq!(o.status.code(), Some(0), "{pb}: {}", text(&o));
    }
    // The same lint fails a task that shells out without a name, or it proves nothing.
    let tune = project.join("roles/daqtune/tasks/tune.yml");
    let mut body = read(&tune);
    body.push_str("\n- ansible.builtin.shell: daqtune apply --yes\n");
    std::fs::write(&tune, body).expect("write");
    let o = lint(&project);
    assert_ne!(
        o.status.code(),
        Some(0),
        "lint accepted a bad task: {}",
        text(&o)
    );
}

/// The validator script: every document of every file against the schemas shipped in the
/// kubernetes-validate package, strict (unknown fields are errors), for each version.
const VALIDATE_PY: &str = r#"
import sys, yaml, kubernetes_validate
versions = sys.argv[1].split(",")
failed = 0
for path in sys.argv[2:]:
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    for doc in docs:
        if doc.get("apiVersion", "").startswith("kustomize.config.k8s.io"):
            continue
        for v in versions:
            try:
                kubernetes_validate.validate(doc, v, strict=True)
                print("ok", path, doc["kind"], v)
            except Exception as e:
                failed += 1
                print("FAIL", path, doc["kind"], v, getattr(e, "message", e))
sys.exit(1 if failed else 0)
"#;

#[test]
fn kubernetes_manifests_validate_against_shipped_schemas_offline() {
    let venv = match venv() {
        Ok(v) => v,
        Err(why) => return skip("kubernetes-validate", &why),
    };
    let d = tempfile::tempdir().expect("tmp");
    let script = d.path().join("validate.py");
    std::fs::write(&script, VALIDATE_PY).expect("script");
    let k = repo().join("deploy/kubernetes");
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in [k.clone(), k.join("qualify")] {
        for e in std::fs::read_dir(&dir).expect("ls").flatten() {
            if e.path().extension().is_some_and(|x| x == "yaml") {
                files.push(e.path());
            }
        }
    }
    files.sort();
    assert!(files.len() >= 4, "{files:?}");
    // A manifest with a misspelt field must fail, or the validation proves nothing.
    let bad = d.path().join("bad.yaml");
    std::fs::write(
        &bad,
        read(&k.join("daemonset.yaml")).replace("hostNetwork: true", "hostNetwrok: true"),
    )
    .expect("bad");
    // The oldest and newest Kubernetes the package has schemas for.
    let versions = "1.25.0,1.37.0";
    let python = venv.bin.join("python3");
    // Networking cut off (a new network namespace): the schemas must come from the package.
    let run = |files: &[PathBuf]| -> (Output, bool) {
        for unshare in [&["-n"][..], &["-r", "-n"][..]] {
            let o = Command::new("unshare")
                .args(unshare)
                .arg(&python)
                .arg(&script)
                .arg(versions)
                .args(files)
                .output();
            if let Ok(o) = o {
                let t = text(&o);
                if !t.contains("unshare:") {
                    return (o, true);
                }
            }
        }
        let o = Command::new(&python)
            .arg(&script)
            .arg(versions)
            .args(files)
            .output()
            .expect("python");
        (o, false)
    };
    let (o, offline) = run(&files);
    if !offline {
        skip(
            "proof that no schema is fetched",
            "unshare -n is not allowed here (validated with networking on)",
        );
    }
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    for kind in ["Namespace", "ConfigMap", "DaemonSet", "Job"] {
        assert!(
            out.contains(&format!(" {kind} 1.25.0")) && out.contains(&format!(" {kind} 1.37.0")),
            "{kind} validated: {out}"
        );
    }
    let (o, _) = run(&[bad]);
    let out = text(&o);
    assert_ne!(o.status.code(), Some(0), "a misspelt field passed: {out}");
    assert!(out.contains("hostNetwrok"), "{out}");
}

/// The fleet guests' bytecode cache for Ansible's module payloads (tests/vm/fleet-guest-bytecode.py):
/// what runs is what the payload holds, whatever an earlier payload left in the cache, and
/// only Ansible's payloads are served by it. Python's own zipimport is the reference: the same
/// imports without the hook.
#[test]
fn fleet_guest_bytecode_cache_runs_what_the_payload_holds() {
    if !daqtune_testkit::require_tool_or_skip("python3", "apt-get install python3") {
        return;
    }
    let hook = repo().join("tests/vm/fleet-guest-bytecode.py");
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = dir.path().join("cache");
    // A payload as Ansible's AnsiballZ sends it: a zip of sources only (made by Python's
    // zipfile, as Ansible makes it).
    let payload = |run: &str, name: &str, value: u32| -> PathBuf {
        let d = dir.path().join(run);
        std::fs::create_dir_all(&d).expect("payload dir");
        let zip_path = d.join(name);
        let module =
            format!("VALUE = {value}\ndef where():\n    return where.__code__.co_filename\n");
        let o = Command::new("python3")
            .args([
                "-I",
                "-c",
                "import sys, zipfile\nwith zipfile.ZipFile(sys.argv[1], 'w') as z:\n    \
                 z.writestr('pkg/__init__.py', '')\n    z.writestr('pkg/mod.py', sys.argv[2])\n",
            ])
            .arg(&zip_path)
            .arg(&module)
            .output()
            .expect("python3");
        assert!(o.status.success(), "zip: {}", text(&o));
        zip_path
    };
    // Loads the hook as the guest's .pth line does, then imports from the payload.
    let run = |zip: &Path, with_hook: bool| -> Vec<String> {
        let program = format!(
            "import sys\n{}sys.path.insert(0, sys.argv[1])\nimport pkg.mod as m\n\
             print(m.VALUE); print(type(m.__loader__).__name__); print(m.__file__); print(m.where())\n",
            if with_hook {
                "exec(compile(open(sys.argv[2]).read(), sys.argv[2], 'exec'))\n"
            } else {
                ""
            }
        );
        let o = Command::new("python3")
            .args(["-I", "-c", &program])
            .arg(zip)
            .arg(&hook)
            .env("ANSIBLE_ZIP_BYTECODE_CACHE", &cache)
            .output()
            .expect("python3");
        assert!(o.status.success(), "python3: {}", text(&o));
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    };
    // The cache's entries and their bytes (testroot::snapshot: every file, mode and content).
    let cache_state = || -> BTreeMap<String, String> {
        testroot::snapshot(&cache, &[])
            .into_iter()
            .filter(|(k, _)| k.ends_with(".bin"))
            .collect()
    };

    let first = payload("ansible_ping_payload_1", "ansible_ping_payload.zip", 1);
    let reference = run(&first, false);
    assert_eq!(reference[0], "1");
    assert_eq!(reference[1], "zipimporter");
    let inner = first.join("pkg").join("mod.py").display().to_string();
    assert_eq!(reference[2], inner);
    assert_eq!(reference[3], inner);

    // First run: compiled and cached (the package and its module), same result as Python's own.
    let out = run(&first, true);
    assert_eq!(out[1], "_CachingZipImporter");
    assert_eq!((out[0].as_str(), &out[2], &out[3]), ("1", &inner, &inner));
    let after_first = cache_state();
    assert_eq!(after_first.len(), 2, "{:?}", after_first.keys());

    // The next task's payload: another directory, the same sources. Served from the cache:
    // its entries stay byte for byte (compiled again, they would name the second payload's
    // file), and its code names the new payload's file, not the one it was first compiled from.
    let second = payload("ansible_ping_payload_2", "ansible_ping_payload.zip", 1);
    let out = run(&second, true);
    let inner2 = second.join("pkg").join("mod.py").display().to_string();
    assert_eq!((out[0].as_str(), &out[2], &out[3]), ("1", &inner2, &inner2));
    assert_eq!(
        cache_state(),
        after_first,
        "the second payload was compiled again"
    );

    // Changed source: a new entry, the new value (never the cached code of the old one).
    let changed = payload("ansible_ping_payload_3", "ansible_ping_payload.zip", 2);
    assert_eq!(run(&changed, true)[0], "2");
    assert_eq!(cache_state().len(), 3);

    // A damaged cache entry is compiled again and replaced, not trusted.
    for rel in cache_state().keys() {
        std::fs::write(cache.join(rel), b"not marshal data").expect("damage");
    }
    let out = run(&second, true);
    assert_eq!((out[0].as_str(), &out[3]), ("1", &inner2));
    let damaged: Vec<_> = cache_state()
        .into_iter()
        .filter(|(_, body)| body.ends_with(" not marshal data"))
        .map(|(k, _)| k)
        .collect();
    // The unchanged package and module of the second payload are written again; the changed
    // module's entry is not imported here and stays as it was left.
    assert_eq!(damaged.len(), 1, "{damaged:?}");

    // Any other zip on the path is Python's own business.
    let other = payload("elsewhere", "library.zip", 3);
    let out = run(&other, true);
    assert_eq!((out[0].as_str(), out[1].as_str()), ("3", "zipimporter"));
}
