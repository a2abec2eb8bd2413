use super::*;
use brine_protocol::loads::{Fun, PublishReply};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use tokio::sync::mpsc;

#[derive(Debug, Clone)]
struct Ev {
    tag: String,
}

impl JobEvent for Ev {
    fn tag(&self) -> &str {
        &self.tag
    }
    fn reports_running(&self) -> bool {
        false
    }
}

/// A master with three minions: `pings` answer test.ping, `runs` answer the job; every
/// publish is recorded as (function, targets).
struct Fake {
    tx: mpsc::UnboundedSender<Ev>,
    pings: Vec<&'static str>,
    runs: Vec<&'static str>,
    next: AtomicU64,
    log: Mutex<Vec<(String, Vec<String>)>>,
}

impl Publish for &Fake {
    async fn publish(&self, req: PublishRequest) -> Result<PublishReply, ClientError> {
        let targets: Vec<String> = match &req.tgt {
            Tgt::List(l) => l.clone(),
            Tgt::Expr(_) => ["m1", "m2", "m3"].map(String::from).to_vec(),
        };
        let Fun::One(fun) = &req.fun else {
            panic!("one function")
        };
        self.log
            .lock()
            .unwrap()
            .push((fun.clone(), targets.clone()));
        let jid = format!("j{}", self.next.fetch_add(1, Ordering::Relaxed));
        let answering = match fun.as_str() {
            "test.ping" => &self.pings,
            "saltutil.find_job" => &Vec::new(),
            _ => &self.runs,
        };
        for t in &targets {
            if answering.contains(&t.as_str()) {
                let tag = format!("salt/job/{jid}/ret/{t}");
                self.tx.send(Ev { tag }).unwrap();
            }
        }
        Ok(PublishReply {
            jid,
            minions: targets,
            missing: Vec::new(),
        })
    }
}

fn fake(pings: &[&'static str], runs: &[&'static str]) -> (Fake, mpsc::UnboundedReceiver<Ev>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let f = Fake {
        tx,
        pings: pings.to_vec(),
        runs: runs.to_vec(),
        next: AtomicU64::new(1),
        log: Mutex::new(Vec::new()),
    };
    (f, rx)
}

struct Feed(mpsc::UnboundedReceiver<Ev>);

impl EventFeed for Feed {
    type Event = Ev;
    async fn recv(&mut self) -> Option<Ev> {
        self.0.recv().await
    }
}

fn job() -> PublishRequest {
    PublishRequest::new(
        Tgt::Expr("*".into()),
        Fun::One("state.apply".into()),
        Vec::new(),
        "glob",
    )
}

fn waits() -> Timeouts {
    Timeouts::from_secs(5, 5, 60)
}

/// The run's events as words.
async fn run(f: &Fake, feed: Feed, batch: Batch, stop_at: Option<&str>) -> Vec<String> {
    let client = LocalClient::new(f);
    let mut seen = Vec::new();
    client
        .batch(feed, &job(), batch, waits(), |ev| {
            let word = match ev {
                BatchEvent::Down(ids) => format!("down {}", ids.join(",")),
                BatchEvent::Started { jid, minions } => {
                    format!("start {jid} {}", minions.join(","))
                }
                BatchEvent::Return { jid, id, event } => {
                    assert_eq!(event.tag, format!("salt/job/{jid}/ret/{id}"));
                    format!("ret {jid} {id}")
                }
                BatchEvent::NoReturn { jid, id } => format!("none {jid} {id}"),
            };
            let stop = stop_at == Some(word.as_str());
            seen.push(word);
            if stop {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .await
        .unwrap();
    seen
}

fn count(n: usize) -> Batch {
    Batch {
        size: BatchSize::Count(n),
        wait: Duration::ZERO,
    }
}

#[tokio::test(start_paused = true)]
async fn a_freed_place_is_taken_by_the_next_minion() {
    let all = ["m1", "m2", "m3"];
    let (f, rx) = fake(&all, &all);
    let seen = run(&f, Feed(rx), count(2), None).await;
    assert_eq!(
        seen,
        [
            "start j2 m1,m2",
            "ret j2 m1",
            "start j3 m3",
            "ret j2 m2",
            "ret j3 m3"
        ]
    );
    let log = f.log.lock().unwrap();
    assert_eq!(
        log[0],
        (
            "test.ping".into(),
            vec!["m1".into(), "m2".into(), "m3".into()]
        )
    );
}

#[tokio::test(start_paused = true)]
async fn minions_that_do_not_answer_the_ping_get_no_job() {
    let (f, rx) = fake(&["m1", "m3"], &["m1", "m2", "m3"]);
    let seen = run(&f, Feed(rx), count(5), None).await;
    assert_eq!(
        seen,
        ["down m2", "start j3 m1,m3", "ret j3 m1", "ret j3 m3"]
    );
    // The ping asked m2 with find_job before giving up on it.
    let log = f.log.lock().unwrap();
    assert!(log
        .iter()
        .any(|(fun, t)| fun == "saltutil.find_job" && t == &["m2"]));
}

#[tokio::test(start_paused = true)]
async fn a_minion_that_never_returns_frees_its_place_at_the_timeout() {
    let (f, rx) = fake(&["m1", "m2", "m3"], &["m2", "m3"]);
    let seen = run(&f, Feed(rx), count(1), None).await;
    assert_eq!(
        seen,
        [
            "start j2 m1",
            "none j2 m1",
            "start j4 m2",
            "ret j4 m2",
            "start j5 m3",
            "ret j5 m3"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn the_caller_stops_the_run() {
    let all = ["m1", "m2", "m3"];
    let (f, rx) = fake(&all, &all);
    let seen = run(&f, Feed(rx), count(1), Some("ret j2 m1")).await;
    assert_eq!(seen, ["start j2 m1", "ret j2 m1"]);
    assert_eq!(f.log.lock().unwrap().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn batch_wait_keeps_a_place_empty() {
    let all = ["m1", "m2", "m3"];
    let (f, rx) = fake(&all, &all);
    let started = Instant::now();
    let batch = Batch {
        size: BatchSize::Percent(50.0),
        wait: Duration::from_secs(3),
    };
    let seen = run(&f, Feed(rx), batch, None).await;
    assert_eq!(
        seen,
        [
            "start j2 m1",
            "ret j2 m1",
            "start j3 m2",
            "ret j3 m2",
            "start j4 m3",
            "ret j4 m3"
        ]
    );
    assert!(started.elapsed() >= Duration::from_secs(6));
}

#[tokio::test(start_paused = true)]
async fn nothing_matched_runs_nothing() {
    let (f, rx) = fake(&[], &[]);
    let client = LocalClient::new(&f);
    let mut req = job();
    req.tgt = Tgt::List(Vec::new());
    let used = client
        .batch(Feed(rx), &req, count(1), waits(), |_| {
            ControlFlow::Continue(())
        })
        .await
        .unwrap();
    assert!(used.is_empty());
}

#[test]
fn sizes_are_read_and_shared_as_salt_does() {
    assert_eq!(BatchSize::parse("3"), Some(BatchSize::Count(3)));
    assert_eq!(BatchSize::parse("10%"), Some(BatchSize::Percent(10.0)));
    assert_eq!(BatchSize::parse("%10"), Some(BatchSize::Percent(10.0)));
    for bad in ["0", "0%", "abc", "-1", "1.5", "", "%"] {
        assert_eq!(BatchSize::parse(bad), None, "{bad}");
    }
    // Below one minion rounds up, above rounds down.
    assert_eq!(BatchSize::Percent(1.0).of(10), 1);
    assert_eq!(BatchSize::Percent(25.0).of(10), 2);
    assert_eq!(BatchSize::Percent(50.0).of(3), 1);
    assert_eq!(BatchSize::Percent(100.0).of(7), 7);
    assert_eq!(BatchSize::Count(4).of(2), 4);
    assert_eq!(
        invalid_batch_text("abc"),
        "Invalid batch data sent: abc\nData must be in the form of %10, 10% or 3"
    );
}

#[test]
fn a_subset_is_n_of_the_minions_and_at_least_one() {
    let all: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
    let two = choose_subset(all.clone(), 2);
    assert_eq!(two.len(), 2);
    assert!(two.iter().all(|m| all.contains(m)) && two[0] != two[1]);
    assert_eq!(choose_subset(all.clone(), 0).len(), 1);
    assert_eq!(choose_subset(all.clone(), 9).len(), 4);
    assert!(choose_subset(Vec::new(), 3).is_empty());
}

#[test]
fn the_highest_retcode_counts() {
    use brine_protocol::payload::Value;
    assert_eq!(batch_retcode(&Value::from(3)), 3);
    let multi = Value::Map(vec![
        (Value::from("test.ping"), Value::from(0)),
        (Value::from("cmd.run"), Value::from(2)),
    ]);
    assert_eq!(batch_retcode(&multi), 2);
    assert_eq!(batch_retcode(&Value::Map(vec![])), 0);
    assert_eq!(batch_retcode(&Value::from("x")), 0);
}
