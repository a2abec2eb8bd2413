//! `salt -b` and `salt --subset`: Brine's `salt` on Brine's master and Salt 3007's own `salt` on a real Salt
//! master, each with three of Brine's minions named alike, print the same batches and exit
//! with the same codes.

use brine_e2e::{real, stderr, stdout, Stack};

/// The run's lines, sorted, with jids masked, JSON's trailing commas dropped and each
/// "Executing run on" line reduced to how many minions ran together (which minions share a
/// batch, which return comes first and the order of a published list of targets may differ
/// from run to run).
fn lines(text: &str) -> Vec<String> {
    let mut out: Vec<String> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            if l.starts_with("Executing run on") {
                return format!("Executing run on {}", l.matches('\'').count() / 2);
            }
            let mut masked = String::new();
            let mut digits = String::new();
            for c in l.chars().chain(std::iter::once('\n')) {
                if c.is_ascii_digit() {
                    digits.push(c);
                    continue;
                }
                if digits.len() == 20 {
                    masked.push_str("JID");
                } else {
                    masked.push_str(&digits);
                }
                digits.clear();
                if c != '\n' {
                    masked.push(c);
                }
            }
            masked.trim_end_matches(',').to_string()
        })
        .collect();
    out.sort();
    out
}

#[test]
fn batches_and_subsets_print_and_exit_as_salts_own_salt_does() {
    let Some((v7, _)) = real::venvs() else {
        return;
    };
    let mut st = Stack::new("timeout: 10\ngather_job_timeout: 3\n");
    st.start_master();
    for id in ["b1", "b2", "b3"] {
        st.start_minion(id, "");
    }
    st.wait_pending(&["b1", "b2", "b3"]);
    let acc = st.tool("salt-key", &["-Ay"]);
    assert!(acc.status.success(), "{}", stderr(&acc));
    st.wait_answering(&["b1", "b2", "b3"]);
    let mut rm = real::RealMaster::new(&v7, "timeout: 10\ngather_job_timeout: 3\n");
    rm.start();
    for id in ["b1", "b2", "b3"] {
        rm.start_brine_minion(id, "");
    }
    rm.accept(&["b1", "b2", "b3"]);
    rm.wait_answering(&["b1", "b2", "b3"]);

    let cases: &[&[&str]] = &[
        &["-b", "2", "b*", "test.ping"],
        &["-b", "34%", "b*", "test.echo", "hi", "--out", "json"],
        &[
            "b*",
            "cmd.run",
            "exit 3",
            "--batch-size",
            "1",
            "--out",
            "yaml",
        ],
        &["-b", "1", "b1", "cmd.run", "echo one", "--out", "txt"],
        &[
            "-b", "5", "-L", "b1,b2", "test.arg", "x", "k=v", "--out", "json",
        ],
        &["-b", "1", "--failhard", "b*", "cmd.run", "exit 4"],
        &["-b", "1", "--batch-wait", "1", "b1,b2", "-L", "test.true"],
        &["-b", "1", "nomatch*", "test.ping"],
        &["-b", "abc", "b*", "test.ping"],
        &["--subset", "1", "b2", "test.echo", "sub"],
        &[
            "--subset",
            "5",
            "b*",
            "test.ping",
            "--static",
            "--out",
            "json",
        ],
        &["b*", "test.ping", "--subset=-1", "--out", "txt"],
        &["b*", "cmd.run", "exit 3", "--static", "--out", "json"],
        &["b*", "test.ping", "--static"],
        &["nomatch*", "test.ping", "--static", "--out", "json"],
        &[
            "-b",
            "1",
            "b*",
            "test.echo",
            "x",
            "--static",
            "--out",
            "yaml",
        ],
        &["-s", "--failhard", "-b", "1", "b*", "cmd.run", "exit 5"],
        &["--subset", "2", "b*", "nosuch.function"],
    ];
    for args in cases {
        compare(&st, &rm, args);
    }
    // --failhard stops after the first bad return: one batch of one.
    let out = st.tool(
        "salt",
        &["-b", "1", "--failhard", "b*", "cmd.run", "exit 4"],
    );
    assert_eq!(stdout(&out).matches("Executing run on").count(), 1);
    assert!(
        stderr(&out).contains("Batch run stopped due to failhard"),
        "{}",
        stderr(&out)
    );

    // A minion that is down gets no job (Salt's words for it, as salt 3007 prints them).
    st.kill_minion("b3");
    let out = st.tool("salt", &["-b", "2", "b*", "test.ping", "--out", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with(
            "Minion b3 did not respond. No job will be sent.\n\nExecuting run on ['b1', 'b2']\n\n"
        ),
        "{text}"
    );
    assert_eq!(text.matches("\"retcode\": 0").count(), 2, "{text}");
    // --static leaves it out.
    let (v, code) = st.salt_json(&["b*", "test.ping"]);
    assert_eq!((v, code), (serde_json::json!({"b1": true, "b2": true}), 0));
    rm.stop_minion("b3");
    let down: &[&[&str]] = &[
        &["-b", "2", "b*", "test.ping", "--out", "json"],
        &["b*", "test.ping", "--static", "--out", "json"],
    ];
    for args in down {
        compare(&st, &rm, args);
    }
    // Every targeted minion down: no batch runs at all.
    for id in ["b1", "b2"] {
        st.kill_minion(id);
        rm.stop_minion(id);
    }
    let all_down: &[&[&str]] = &[
        &["-b", "2", "b*", "test.ping"],
        &["b*", "test.ping", "--static", "--out", "json"],
    ];
    for args in all_down {
        compare(&st, &rm, args);
    }
    rm.stop();
}

/// Run `args` with Brine's `salt` on Brine's master and Salt's on Salt's: the same exit code
/// and the same lines.
fn compare(st: &Stack, rm: &real::RealMaster, args: &[&str]) {
    let brine = st.tool("salt", args);
    let salt = rm.tool("salt", args);
    let (b, s) = (stdout(&brine), stdout(&salt));
    assert_eq!(
        brine.status.code(),
        salt.status.code(),
        "{args:?}: exit codes\nbrine: {b}{}\nsalt: {s}{}",
        stderr(&brine),
        stderr(&salt)
    );
    // With --failhard the run stops after the first minion, and a subset of one is
    // one minion: any of them.
    let ids = |t: &str| {
        let mut ls = lines(t);
        if args.contains(&"--failhard") || args.contains(&"--subset=-1") {
            for l in &mut ls {
                *l = l
                    .replace("b1", "bN")
                    .replace("b2", "bN")
                    .replace("b3", "bN");
            }
            ls.sort();
        }
        ls
    };
    assert_eq!(
        ids(&b),
        ids(&s),
        "{args:?}\nbrine:\n{b}\nsalt:\n{s}\n{}",
        st.logs()
    );
}
