//! docker-compose.yml and deploy/compose/: the file is a valid Compose Specification
//! document, every service command uses only flags its binary accepts, and the config files
//! the services read exist and load with Brine's own config loaders.
//!
//! The schema check runs the venv of scripts/test (BRINE_TEST_VENV: jsonschema_rs and the
//! Compose Specification schema from the docker-compose 1.29.2 wheel on PyPI); without it
//! that test says so and returns. The other checks need only the built binaries.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use brine_api::config::ApiConfig;
use brine_e2e::{bin, test_venv};
use brine_protocol::config::{MasterConfig, MinionConfig};
use serde_yaml::Value as Yaml;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// docker-compose.yml with YAML merge keys (`<<: *brine`) applied, as Compose reads it.
fn compose() -> Yaml {
    let path = repo().join("docker-compose.yml");
    let text = std::fs::read_to_string(&path).expect("docker-compose.yml");
    let mut doc: Yaml = serde_yaml::from_str(&text).expect("docker-compose.yml is YAML");
    doc.apply_merge().expect("merge keys");
    doc
}

fn services(doc: &Yaml) -> Vec<(String, Yaml)> {
    doc["services"]
        .as_mapping()
        .expect("services")
        .iter()
        .map(|(k, v)| (k.as_str().expect("service name").to_string(), v.clone()))
        .collect()
}

/// A service's `command:` as a list of words (the short string form is split on spaces).
fn command(svc: &Yaml) -> Vec<String> {
    match &svc["command"] {
        Yaml::Sequence(s) => s
            .iter()
            .map(|w| match w {
                Yaml::String(s) => s.clone(),
                other => serde_yaml::to_string(other).unwrap().trim().to_string(),
            })
            .collect(),
        Yaml::String(s) => s.split_whitespace().map(str::to_string).collect(),
        other => panic!("command is not a list or a string: {other:?}"),
    }
}

/// Check `args` against the binary's own parser (it prints its parse with
/// `BRINE_PRINT_OPTPARSE` set, see `brine_protocol::optparse`); returns the options set, by
/// Salt's destination names (`config_dir`).
fn check_args(service: &str, name: &str, args: &[String]) -> BTreeMap<String, String> {
    let out = Command::new(bin(name))
        .args(args)
        .env(brine_protocol::optparse::PRINT_ENV, "1")
        .stdin(Stdio::null())
        .output()
        .expect("run the binary");
    assert!(
        out.status.success(),
        "service {service}: {name} rejects its command line {args:?}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parse: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the parse is JSON");
    let positional = parse["args"].as_array().expect("args");
    assert!(
        positional.is_empty(),
        "service {service}: {name} takes no positional argument, got {positional:?}"
    );
    parse["options"]
        .as_object()
        .expect("options")
        .iter()
        .map(|(k, v)| {
            let v = match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k.clone(), v)
        })
        .collect()
}

/// Bind mounts of a service: container path -> host path (relative to the compose file).
/// Named volumes: container path -> volume name.
fn mounts(svc: &Yaml) -> (BTreeMap<PathBuf, PathBuf>, BTreeMap<PathBuf, String>) {
    let mut binds = BTreeMap::new();
    let mut named = BTreeMap::new();
    for v in svc["volumes"].as_sequence().cloned().unwrap_or_default() {
        let (source, target) = match &v {
            Yaml::String(s) => {
                let parts: Vec<&str> = s.split(':').collect();
                assert!(parts.len() >= 2, "volume {s:?} has no target");
                (parts[0].to_string(), parts[1].to_string())
            }
            Yaml::Mapping(_) => (
                v["source"].as_str().expect("volume source").to_string(),
                v["target"].as_str().expect("volume target").to_string(),
            ),
            other => panic!("volume entry {other:?}"),
        };
        if source.starts_with('.') || source.starts_with('/') {
            binds.insert(PathBuf::from(target), repo().join(source));
        } else {
            named.insert(PathBuf::from(target), source);
        }
    }
    (binds, named)
}

/// Where a container path comes from on the host, through the service's bind mounts.
fn host_path(binds: &BTreeMap<PathBuf, PathBuf>, container: &Path) -> Option<PathBuf> {
    binds
        .iter()
        .filter(|(target, _)| container.starts_with(target))
        .max_by_key(|(target, _)| target.components().count())
        .map(|(target, source)| source.join(container.strip_prefix(target).unwrap()))
}

/// The named volume holding a container path, if any.
fn volume_of(named: &BTreeMap<PathBuf, String>, container: &Path) -> Option<String> {
    named
        .iter()
        .filter(|(target, _)| container.starts_with(target))
        .max_by_key(|(target, _)| target.components().count())
        .map(|(_, name)| name.clone())
}

/// The container ports a service publishes.
fn published(svc: &Yaml) -> BTreeSet<u16> {
    svc["ports"]
        .as_sequence()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|p| {
            let s = p.as_str().expect("port as a string");
            s.rsplit(':')
                .next()
                .and_then(|c| c.split('/').next())
                .and_then(|c| c.parse().ok())
                .unwrap_or_else(|| panic!("port {s:?}"))
        })
        .collect()
}

#[test]
fn compose_services_use_real_flags_and_loadable_configs() {
    let doc = compose();
    let dockerfile = std::fs::read_to_string(repo().join("Dockerfile")).expect("Dockerfile");
    let services = services(&doc);
    let names: BTreeSet<String> = services.iter().map(|(n, _)| n.clone()).collect();
    let mut masters: BTreeMap<String, MasterConfig> = BTreeMap::new();
    let mut seen_bins = BTreeSet::new();
    let mut minions = Vec::new();

    for (service, svc) in &services {
        if svc["build"].is_null() {
            // Not Brine (the scale profile's PostgreSQL and NATS): only in a profile.
            assert!(
                svc["profiles"].as_sequence().is_some_and(|p| !p.is_empty()),
                "service {service} runs another image outside any profile"
            );
            continue;
        }
        let cmd = command(svc);
        let name = Path::new(&cmd[0])
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(
            dockerfile.contains(&format!("target/release/{name}")),
            "service {service} runs {name}, which the Dockerfile does not install"
        );
        let values = check_args(service, &name, &cmd[1..]);
        let conf_dir = values
            .get("config_dir")
            .cloned()
            .unwrap_or_else(|| "/etc/salt".to_string());
        let (binds, named) = mounts(svc);
        let dir = host_path(&binds, Path::new(&conf_dir)).unwrap_or_else(|| {
            panic!("service {service}: its config dir {conf_dir} is not a bind mount")
        });
        seen_bins.insert(name.clone());
        match name.as_str() {
            "salt-master" | "salt-api" => {
                assert!(dir.join("master").is_file(), "{}/master", dir.display());
                let cfg = MasterConfig::load(&dir)
                    .unwrap_or_else(|e| panic!("service {service}: {}: {e}", dir.display()));
                // Files the config names must be mounted too.
                if let Some(f) = cfg.external_auth["file"]["^filename"].as_str() {
                    let host = host_path(&binds, Path::new(f)).unwrap_or_else(|| {
                        panic!("service {service}: eauth file {f} is not mounted")
                    });
                    assert!(
                        host.is_file(),
                        "service {service}: {} is missing",
                        host.display()
                    );
                }
                if name == "salt-api" {
                    let api = ApiConfig::from_master(&cfg)
                        .unwrap_or_else(|e| panic!("service {service}: {e}"));
                    assert!(
                        published(svc).contains(&api.port),
                        "service {service}: salt-api listens on {} but publishes {:?}",
                        api.port,
                        published(svc)
                    );
                    assert_eq!(
                        api.host, "0.0.0.0",
                        "salt-api must listen beyond the container"
                    );
                } else {
                    let ports = published(svc);
                    assert!(ports.contains(&cfg.ret_port) && ports.contains(&cfg.publish_port));
                    assert_eq!(
                        cfg.interface, "0.0.0.0",
                        "the master must listen beyond the container"
                    );
                }
                // pki_dir, cachedir and sock_dir live in named volumes (shared with salt-api).
                let vols: Vec<String> = [&cfg.pki_dir, &cfg.cachedir, &cfg.sock_dir]
                    .iter()
                    .map(|p| {
                        volume_of(&named, p).unwrap_or_else(|| {
                            panic!("service {service}: {} is not on a volume", p.display())
                        })
                    })
                    .collect();
                masters.insert(format!("{service}:{name}:{}", vols.join(",")), cfg);
            }
            "salt-minion" => {
                assert!(dir.join("minion").is_file(), "{}/minion", dir.display());
                let raw = brine_protocol::config::load_raw(&dir, "minion").unwrap();
                assert!(
                    raw.values.contains_key("id"),
                    "service {service}: the minion config must set its id"
                );
                let cfg = MinionConfig::load(&dir)
                    .unwrap_or_else(|e| panic!("service {service}: {}: {e}", dir.display()));
                assert!(
                    volume_of(&named, &cfg.pki_dir).is_some(),
                    "service {service}: the minion's keys are not on a volume"
                );
                minions.push((service.clone(), cfg));
            }
            other => panic!("service {service}: unexpected binary {other}"),
        }
    }
    for b in ["salt-master", "salt-api", "salt-minion"] {
        assert!(seen_bins.contains(b), "no service runs {b}");
    }

    // Each salt-api runs next to a master: the same pki, cache and sock volumes.
    let split = |k: &String| {
        let mut parts = k.splitn(3, ':');
        let (service, bin, vols) = (parts.next(), parts.next(), parts.next());
        (
            service.unwrap().to_string(),
            bin.unwrap().to_string(),
            vols.unwrap().to_string(),
        )
    };
    let master_vols: BTreeMap<String, String> = masters
        .keys()
        .map(split)
        .filter(|(_, bin, _)| bin == "salt-master")
        .map(|(service, _, vols)| (vols, service))
        .collect();
    for (service, bin, vols) in masters.keys().map(split) {
        assert!(
            bin != "salt-api" || master_vols.contains_key(&vols),
            "service {service}: salt-api must share a master's pki, cache and sock volumes: {:?}",
            masters.keys()
        );
    }
    let master_of = |name: &str| {
        masters
            .iter()
            .find(|(k, _)| k.starts_with(&format!("{name}:salt-master:")))
            .map(|(_, c)| c)
    };
    assert!(
        master_of("master").is_some(),
        "a service named master running salt-master"
    );

    // Each minion finds its master services on their ret port, with its own id.
    let mut ids = BTreeSet::new();
    for (service, cfg) in &minions {
        for m in &cfg.masters {
            assert!(
                names.contains(&m.host),
                "service {service}: master {} is not a compose service",
                m.host
            );
            let master = master_of(&m.host).unwrap_or_else(|| {
                panic!("service {service}: {} does not run salt-master", m.host)
            });
            assert_eq!(m.port, master.ret_port, "service {service}");
        }
        assert!(ids.insert(cfg.id.clone()), "two minions are {}", cfg.id);
    }
    assert!(minions.len() >= 2, "two minions at least");
}

#[test]
fn compose_file_matches_compose_spec_schema() {
    let Some(venv) = test_venv("compose_file_matches_compose_spec_schema") else {
        return;
    };
    let schema = venv.join("share/compose-spec.json");
    assert!(
        schema.is_file(),
        "{} is missing: rerun scripts/test to rebuild the venv",
        schema.display()
    );
    // Validate the real file, and a copy with an unknown service key, which must fail (so a
    // validator that accepts anything cannot pass this test).
    let script = r#"
import copy, json, sys
import jsonschema_rs, yaml

schema = json.load(open(sys.argv[1]))
assert "services" in schema["properties"], "not the Compose Specification schema"
jsonschema_rs.meta.validate(schema)
doc = yaml.safe_load(open(sys.argv[2]))
validator = jsonschema_rs.validator_for(schema)
errors = ["/".join(map(str, e.instance_path)) + ": " + e.message for e in validator.iter_errors(doc)]
bad = copy.deepcopy(doc)
first = next(iter(bad["services"]))
bad["services"][first]["no_such_key"] = 1
if validator.is_valid(bad):
    errors.append("the validator accepted an unknown service key")
for e in errors:
    print(e)
print("compose: %d services, %d errors" % (len(doc["services"]), len(errors)))
sys.exit(1 if errors else 0)
"#;
    let out = Command::new(venv.join("bin/python"))
        .arg("-c")
        .arg(script)
        .arg(&schema)
        .arg(repo().join("docker-compose.yml"))
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("LANG", "C.UTF-8")
        .stdin(Stdio::null())
        .output()
        .expect("run the venv's python");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "docker-compose.yml does not match the Compose Specification:\n{text}"
    );
    assert!(text.contains("0 errors"), "{text}");
}
