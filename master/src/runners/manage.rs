//! `manage.*`: which minions are up, connected, and on which Salt version.

use std::collections::HashMap;

use brine_protocol::loads::{Fun, PublishRequest, Tgt};
use brine_protocol::payload::{get, get_str, map, Value};

use super::{ids, ready, Call, Runner, RunnerFuture};

pub const FUNCTIONS: &[Runner] = &[
    Runner {
        name: "manage.alived",
        args: &["subset=None", "show_ip=False"],
        doc: "Return the minions connected to the master now.\n\nCLI Example:\n\n    salt-run manage.alived\n",
        run: |c| ready(Ok(connected(&c))),
    },
    Runner {
        name: "manage.down",
        args: &[
            "removekeys=False",
            "tgt='*'",
            "tgt_type='glob'",
            "timeout=None",
            "gather_job_timeout=None",
        ],
        doc: "Return the accepted minions that do not answer test.ping.\n\nCLI Example:\n\n    salt-run manage.down\n",
        run: status,
    },
    Runner {
        name: "manage.present",
        args: &["subset=None", "show_ip=False"],
        doc: "Return the minions connected to the master now.\n\nCLI Example:\n\n    salt-run manage.present\n",
        run: |c| ready(Ok(connected(&c))),
    },
    Runner {
        name: "manage.status",
        args: &[
            "output=True",
            "tgt='*'",
            "tgt_type='glob'",
            "timeout=None",
            "gather_job_timeout=None",
        ],
        doc: "Return the accepted minions that answer test.ping (up) and those that do not (down).\n\nCLI Example:\n\n    salt-run manage.status\n",
        run: status,
    },
    Runner {
        name: "manage.up",
        args: &[
            "tgt='*'",
            "tgt_type='glob'",
            "timeout=None",
            "gather_job_timeout=None",
        ],
        doc: "Return the minions that answer test.ping.\n\nCLI Example:\n\n    salt-run manage.up\n",
        run: status,
    },
    Runner {
        name: "manage.versions",
        args: &[],
        doc: "Return the Salt version of every minion against the master's.\n\nCLI Example:\n\n    salt-run manage.versions\n",
        run: versions,
    },
];

fn connected(c: &Call) -> Value {
    let mut ids_now = c.master.connected_ids();
    ids_now.sort();
    ids(&ids_now)
}

fn everyone(fun: &str) -> PublishRequest {
    PublishRequest::new(Tgt::Expr("*".into()), Fun::One(fun.into()), vec![], "glob")
}

/// `manage.status`, `manage.up` and `manage.down`: who answers `test.ping`.
fn status(c: Call) -> RunnerFuture {
    Box::pin(async move {
        let res = c.master.local_cmd(everyone("test.ping"), c.timeout).await;
        let mut up: Vec<String> = res.returns.iter().map(|(id, _)| id.clone()).collect();
        up.sort();
        let mut down: Vec<String> = c
            .master
            .keys
            .accepted()
            .into_iter()
            .filter(|id| !up.contains(id))
            .collect();
        down.sort();
        Ok(match c.fun {
            "manage.up" => ids(&up),
            "manage.down" => ids(&down),
            _ => map(vec![("up", ids(&up)), ("down", ids(&down))]),
        })
    })
}

fn versions(c: Call) -> RunnerFuture {
    Box::pin(async move {
        let res = c
            .master
            .local_cmd(everyone("test.version"), c.timeout)
            .await;
        let master_version = brine_protocol::SALT_VERSION;
        let mut groups: HashMap<&str, Vec<(Value, Value)>> = HashMap::new();
        let mut answered: Vec<&(String, Value)> = res.returns.iter().collect();
        answered.sort_by(|a, b| a.0.cmp(&b.0));
        for (id, ret) in answered {
            let retcode = get(ret, "retcode")
                .and_then(brine_protocol::loads::int)
                .unwrap_or(0);
            let (label, v) = match get_str(ret, "return") {
                Some(v) if retcode == 0 => {
                    let label = match compare_versions(v, master_version) {
                        std::cmp::Ordering::Less => "Minion requires update",
                        std::cmp::Ordering::Equal => "Up to date",
                        std::cmp::Ordering::Greater => "Minion newer than master",
                    };
                    (label, Value::from(v))
                }
                _ => ("Minion offline", Value::from(false)),
            };
            groups
                .entry(label)
                .or_default()
                .push((Value::from(id.as_str()), v));
        }
        let mut down: Vec<String> = res
            .minions
            .iter()
            .filter(|m| !res.returns.iter().any(|(id, _)| id == *m))
            .cloned()
            .collect();
        down.sort();
        for id in down {
            groups
                .entry("Minion offline")
                .or_default()
                .push((Value::from(id), Value::from(false)));
        }
        let mut out = Vec::new();
        for label in [
            "Minion offline",
            "Minion requires update",
            "Up to date",
            "Minion newer than master",
        ] {
            if let Some(g) = groups.remove(label) {
                out.push((Value::from(label), Value::Map(g)));
            }
        }
        out.push((Value::from("Master"), Value::from(master_version)));
        Ok(Value::Map(out))
    })
}

/// Compare dotted version strings numerically ("3007.15" < "3007.16").
fn compare_versions(a: &str, b: &str) -> std::cmp::Ordering {
    let parts = |s: &str| -> Vec<u64> {
        s.split(|c: char| !c.is_ascii_digit())
            .filter(|p| !p.is_empty())
            .filter_map(|p| p.parse().ok())
            .collect()
    };
    parts(a).cmp(&parts(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_numerically() {
        use std::cmp::Ordering::*;
        assert_eq!(compare_versions("3007.15", "3007.15"), Equal);
        assert_eq!(compare_versions("3006.9", "3007.15"), Less);
        assert_eq!(compare_versions("3007.16", "3007.15"), Greater);
        assert_eq!(compare_versions("3007.100", "3007.15"), Greater);
    }
}
