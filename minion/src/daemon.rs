//! `salt-minion`: sign in, subscribe, run what is published for us, return the results.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use brine_protocol::config::{MasterAddr, MasterType, MinionConfig};
use brine_protocol::crypt::{load_or_generate_keypair, EncAlgo, HashType, SerialGuard, SigAlgo};
use brine_protocol::loads::{Fun, MinionEventLoad, MinionEvents, PublishLoad, ReturnLoad};
use brine_protocol::payload::{bytes_of, get, get_str, loads, map, Value};
use brine_protocol::target::{matches, MinionData};
use brine_transport::{tcp_endpoint, Subscriber};
use tokio::sync::mpsc;

use crate::channel::{Channel, ChannelError, Creds, Identity};
use crate::functions::{self, CallResult, Context, RunningJob, RunningJobs, Services};
use crate::outbox::Outbox;
use crate::proc_dir::ProcDir;
use crate::resolve::{self, Patience};
use crate::schedule::{Due, Where};

/// How many recent jids are remembered to drop duplicate publishes (Salt's
/// `minion_jid_queue_hwm`).
const JID_QUEUE: usize = 100;

pub struct Minion {
    pub cfg: MinionConfig,
    pub channel: Arc<Channel>,
    pub running: Arc<RunningJobs>,
    /// The schedule, beacons and master link of the `schedule`, `beacons` and `mine` modules.
    pub services: Arc<Services>,
    /// The master this minion signs in to and returns to.
    pub(crate) master: MasterAddr,
    job_timeout: Option<Duration>,
    /// Returns the master has not taken yet.
    outbox: Outbox,
    /// The jobs running, on disk.
    procs: ProcDir,
    /// The jids of the latest publishes, shared by the minion's service of each master.
    recent: Arc<RecentJids>,
}

/// The jids of the latest publishes, [`JID_QUEUE`] of them (Salt's `jid_queue`): a job
/// received again, from the same master or from another one of a multi-master list, runs
/// once.
#[derive(Default)]
pub(crate) struct RecentJids(std::sync::Mutex<VecDeque<String>>);

impl RecentJids {
    /// Whether `jid` is seen for the first time (it is remembered then).
    fn first_time(&self, jid: &str) -> bool {
        let mut recent = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if recent.iter().any(|j| j == jid) {
            return false;
        }
        recent.push_back(jid.to_string());
        if recent.len() > JID_QUEUE {
            recent.pop_front();
        }
        true
    }
}

/// Exit codes Salt's minion uses.
pub const EXIT_REJECTED: i32 = 77;
pub const EXIT_FINGER: i32 = 42;
/// Salt exits with 42 when the master's address cannot be resolved, too.
pub const EXIT_UNRESOLVABLE: i32 = 42;

/// Why a minion of a master could not be made.
#[derive(Debug)]
pub enum NotStarted {
    /// The master's name did not resolve (`retry_dns_count` tries).
    Unresolvable(resolve::Unresolvable),
    /// Its keys, cache or outbox could not be set up.
    Setup(anyhow::Error),
}

impl NotStarted {
    /// The process's exit code.
    pub fn code(&self) -> i32 {
        match self {
            NotStarted::Unresolvable(_) => EXIT_UNRESOLVABLE,
            NotStarted::Setup(_) => 1,
        }
    }
}

impl std::fmt::Display for NotStarted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotStarted::Unresolvable(e) => e.fmt(f),
            NotStarted::Setup(e) => e.fmt(f),
        }
    }
}

impl Minion {
    /// The minion of the first master of the list (a single master, or `salt-call`), once
    /// its name resolves (`retry_dns`).
    pub async fn of_first_master(
        cfg: MinionConfig,
        ctx: &zmq::Context,
        config_dir: &Path,
    ) -> Result<Minion, NotStarted> {
        let named = cfg.masters.first().cloned().unwrap_or(MasterAddr {
            host: "salt".into(),
            port: cfg.master_port,
        });
        let master = resolve::master_addr(&cfg, &named, Patience::Configured)
            .await
            .map_err(NotStarted::Unresolvable)?;
        let outbox = cfg.cachedir.join("outbox");
        Self::for_master(cfg, ctx, config_dir, master, &outbox).map_err(NotStarted::Setup)
    }

    /// The minion's service of `master`, keeping the returns that master has not taken in
    /// the directory `outbox`.
    pub fn for_master(
        cfg: MinionConfig,
        ctx: &zmq::Context,
        config_dir: &Path,
        master: MasterAddr,
        outbox: &Path,
    ) -> anyhow::Result<Minion> {
        std::fs::create_dir_all(&cfg.pki_dir)?;
        brine_protocol::crypt::secure_pki_dir(&cfg.pki_dir)?;
        std::fs::create_dir_all(&cfg.cachedir)?;
        let (key, public) = load_or_generate_keypair(&cfg.pki_dir, "minion", cfg.keysize)
            .map_err(|e| anyhow::anyhow!("minion key pair in {}: {e}", cfg.pki_dir.display()))?;
        let tok = key
            .x931_encrypt(b"salt")
            .map_err(|e| anyhow::anyhow!("cannot make the request token: {e}"))?;
        let enc_algo = EncAlgo::parse(&cfg.encryption_algorithm).ok_or_else(|| {
            anyhow::anyhow!(
                "unsupported encryption_algorithm {}",
                cfg.encryption_algorithm
            )
        })?;
        let sig_algo = SigAlgo::parse(&cfg.signing_algorithm).ok_or_else(|| {
            anyhow::anyhow!("unsupported signing_algorithm {}", cfg.signing_algorithm)
        })?;
        let ident = Identity {
            id: cfg.id.clone(),
            key,
            pub_clean: brine_protocol::crypt::clean_key(&public.to_pem()),
            tok,
            enc_algo,
            sig_algo,
            pki_dir: cfg.pki_dir.clone(),
            master_finger: cfg.master_finger.clone(),
        };
        let channel = Arc::new(Channel::new(
            ctx,
            &master.host,
            master.port,
            ident,
            Duration::from_secs(cfg.request_channel_timeout.max(1)),
            cfg.request_channel_tries,
        ));
        let job_timeout = cfg.job_timeout.map(Duration::from_secs);
        let services = Arc::new(Services::from_config(
            &cfg,
            Some(config_dir),
            Some(channel.clone()),
        ));
        let mine_interval = cfg.mine_interval;
        if cfg.mine_enabled && mine_interval > 0 {
            // Salt's own job that keeps the mine fresh (hidden from `schedule.list`).
            let item = serde_json::json!({
                "function": "mine.update",
                "minutes": mine_interval,
                "jid_include": true,
                "maxrunning": 2,
                "run_on_start": true,
                "return_job": false,
                "enabled": true,
                "name": "__mine_interval",
            });
            if let serde_json::Value::Object(item) = item {
                services
                    .schedule
                    .put(Where::Opts, "__mine_interval", item, false);
            }
        }
        let outbox = Outbox::open(outbox)
            .map_err(|e| anyhow::anyhow!("outbox in {}: {e}", outbox.display()))?;
        let procs = ProcDir::open(&cfg.cachedir)
            .map_err(|e| anyhow::anyhow!("proc dir in {}: {e}", cfg.cachedir.display()))?;
        Ok(Minion {
            cfg,
            channel,
            running: Arc::new(RunningJobs::default()),
            services,
            master,
            job_timeout,
            outbox,
            procs,
            recent: Arc::default(),
        })
    }

    /// This service of a master drops the jobs `recent` has seen (those of other masters).
    fn sharing_jids(mut self, recent: &Arc<RecentJids>) -> Minion {
        self.recent = recent.clone();
        self
    }

    /// The minion's grains now (they change with `grains.setval` and friends and
    /// `saltutil.refresh_grains`).
    pub fn grains(&self) -> Arc<Value> {
        self.services.grains()
    }

    /// Sign in, waiting politely while our key is pending. `Err(Some(code))` for a final
    /// refusal; with `once`, `Err(None)` when the first attempt fails otherwise.
    async fn sign_in(&self, once: bool) -> Result<Creds, Option<i32>> {
        let mut wait = self.cfg.acceptance_wait_time.max(1);
        let auth_timeout = Duration::from_secs(self.cfg.auth_timeout.max(1));
        loop {
            let ch = self.channel.clone();
            let res = tokio::task::spawn_blocking(move || ch.sign_in(auth_timeout))
                .await
                .unwrap_or(Err(ChannelError::NotSignedIn));
            match res {
                Ok(c) => {
                    tracing::info!("signed in to {}", self.master.host);
                    return Ok(c);
                }
                Err(ChannelError::Rejected) if !self.cfg.rejected_retry => {
                    tracing::error!(
                        "The Salt Master has rejected this minion's public key! \
                         To repair this issue, delete the public key for this minion on the \
                         Salt Master and restart this minion."
                    );
                    return Err(Some(EXIT_REJECTED));
                }
                Err(ChannelError::FingerMismatch) => {
                    tracing::error!("The master fingerprint does not match master_finger");
                    return Err(Some(EXIT_FINGER));
                }
                Err(ChannelError::Pending) => {
                    tracing::info!("waiting for the master to accept our key; retrying in {wait}s");
                }
                Err(e) => tracing::warn!("sign-in to {} failed: {e}", self.master),
            }
            if once {
                return Err(None);
            }
            tokio::time::sleep(Duration::from_secs(wait)).await;
            if self.cfg.acceptance_wait_time_max > wait {
                wait =
                    (wait + self.cfg.acceptance_wait_time).min(self.cfg.acceptance_wait_time_max);
            }
        }
    }

    pub(crate) async fn request(&self, load: Value) -> Result<Value, ChannelError> {
        let ch = self.channel.clone();
        tokio::task::spawn_blocking(move || ch.request(&load))
            .await
            .unwrap_or(Err(ChannelError::NotSignedIn))
    }

    pub(crate) async fn fetch_pillar(&self) {
        if let Err(e) = self
            .services
            .refresh_pillar(&self.cfg.id, &self.grains())
            .await
        {
            tracing::warn!("pillar not received: {e}");
        }
    }

    /// Send one `_minion_event` load (every event this minion fires on the master's bus).
    async fn send_events(&self, ev: MinionEventLoad, what: &str) {
        if let Err(e) = self.request(ev.to_value()).await {
            tracing::warn!("event {what} not sent: {e}");
        }
    }

    async fn start_events(&self) {
        let msg = Value::from(format!(
            "Minion {} started at {}",
            self.cfg.id,
            brine_protocol::jid::asctime_now()
        ));
        // Salt adds the grains `start_event_grains` names to its start events' loads.
        let grains = (!self.cfg.start_event_grains.is_empty()).then(|| {
            let grains = self.grains();
            let wanted = |k: &Value| {
                k.as_str()
                    .is_some_and(|k| self.cfg.start_event_grains.iter().any(|g| g == k))
            };
            Value::Map(
                grains
                    .as_map()
                    .map(|m| m.iter().filter(|(k, _)| wanted(k)).cloned().collect())
                    .unwrap_or_default(),
            )
        });
        let mut tags = Vec::new();
        if self.cfg.enable_legacy_startup_events {
            tags.push("minion_start".to_string());
        }
        tags.push(format!("salt/minion/{}/start", self.cfg.id));
        for tag in tags {
            let mut ev = MinionEventLoad::single(&self.cfg.id, &tag, msg.clone());
            if let (
                Some(grains),
                MinionEvents::Single {
                    data: Value::Map(load),
                    ..
                },
            ) = (&grains, &mut ev.events)
            {
                load.push((Value::from("grains"), grains.clone()));
            }
            self.send_events(ev, &tag).await;
        }
    }

    /// Decrypt and check one publish. `None` if it is not for us or unreadable.
    fn open_publish(
        &self,
        creds: &Creds,
        frame: &[u8],
        serials: &mut SerialGuard,
    ) -> Result<Option<PublishLoad>, ()> {
        let env = match loads(frame) {
            Ok(v @ Value::Map(_)) => v,
            _ => return Ok(None),
        };
        if get_str(&env, "enc") != Some("aes") {
            return Ok(None);
        }
        let Some(ct) = get(&env, "load").and_then(bytes_of) else {
            return Ok(None);
        };
        if self.cfg.sign_pub_messages {
            let algo = get_str(&env, "sig_algo")
                .and_then(SigAlgo::parse)
                .unwrap_or(SigAlgo::Pkcs1v15Sha1);
            let ok = get(&env, "sig")
                .and_then(bytes_of)
                .is_some_and(|sig| creds.master_pub.verify(ct, sig, algo));
            if !ok {
                tracing::warn!("publish with a missing or bad signature dropped");
                return Ok(None);
            }
        }
        match creds.aes.loads(ct, None) {
            Ok(Some(mut load)) => {
                if !serials.accept(&mut load) {
                    tracing::debug!("publish with an old serial dropped");
                    return Ok(None);
                }
                match PublishLoad::parse(load) {
                    Ok(l) => Ok(Some(l)),
                    Err(e) => {
                        tracing::warn!("publish ignored: {e}");
                        Ok(None)
                    }
                }
            }
            Ok(None) => Ok(None),
            Err(_) => Err(()),
        }
    }

    fn targets_me(&self, load: &PublishLoad) -> bool {
        let delimiter = load.delimiter.as_deref().unwrap_or(":");
        let pillar = self.services.pillar();
        let grains = self.grains();
        let me = MinionData {
            id: &self.cfg.id,
            grains: Some(&grains),
            pillar: Some(&pillar),
        };
        match matches(&load.tgt.to_value(), &load.tgt_type, delimiter, &me) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!("publish with an unusable target ignored: {e}");
                false
            }
        }
    }

    /// Run one job and send its return.
    async fn run_job(self: Arc<Self>, load: PublishLoad) {
        let jid = load.jid.clone();
        let recorded = self.procs.start(&load);
        // Salt compiles a fresh pillar for pillar.* and state.* functions: ask the master
        // again first.
        let wants_pillar = match &load.fun {
            Fun::One(f) => f.starts_with("pillar.") || f.starts_with("state."),
            Fun::Many(funs) => funs
                .iter()
                .any(|f| f.starts_with("pillar.") || f.starts_with("state.")),
        };
        if wants_pillar {
            self.fetch_pillar().await;
        }
        let ctx = Context {
            id: self.cfg.id.clone(),
            grains: self.grains(),
            running: self.running.clone(),
            pub_load: load.to_value(),
            pillar: self.services.pillar(),
            services: self.services.clone(),
        };
        let mut ret = ReturnLoad::new(&self.cfg.id, &jid, load.fun.clone(), load.arg.clone());
        match &load.fun {
            Fun::Many(funs) => {
                // A multi-function job: one return map keyed by function.
                let (mut rets, mut codes, mut oks) = (Vec::new(), Vec::new(), Vec::new());
                for (i, name) in funs.iter().enumerate() {
                    let a = match load.arg.get(i) {
                        Some(Value::Array(a)) => a.clone(),
                        _ => vec![],
                    };
                    let r = self.call_bounded(&ctx, name, &a).await;
                    rets.push((name.as_str(), r.ret));
                    codes.push((name.as_str(), Value::from(r.retcode)));
                    oks.push((name.as_str(), Value::from(r.retcode == 0)));
                }
                ret.success = Some(map(oks));
                ret.ret = map(rets);
                ret.retcode = Some(map(codes));
            }
            Fun::One(name) => {
                let r = self.call_bounded(&ctx, name, &load.arg).await;
                ret.success = Some(Value::from(r.retcode == 0));
                ret.ret = r.ret;
                ret.retcode = Some(Value::from(r.retcode));
                ret.out = r.out;
            }
        }
        ret.user = load.user.clone();
        if let Some(m) = &load.master_id {
            ret.extra
                .push((Value::from("master_id"), Value::from(m.as_str())));
        }
        if let Some(md) = load.kw.get("metadata") {
            ret.extra.push((Value::from("metadata"), md.clone()));
        }
        ret.stamp = Some(brine_protocol::jid::stamp_now());
        self.running.remove(&jid);
        self.send_return(ret.to_value(), &jid).await;
        self.procs.finish(recorded).await;
    }

    /// Answer the jobs the previous minion process died in with a failed return each.
    async fn answer_left_over_jobs(self: Arc<Self>, jobs: Vec<PublishLoad>) {
        for load in jobs {
            let jid = load.jid.clone();
            tracing::warn!("job {jid} was running when the minion stopped: reported failed");
            let mut ret = ReturnLoad::new(&self.cfg.id, &jid, load.fun.clone(), load.arg.clone());
            ret.ret = Value::from(
                "The minion stopped (killed, crashed or restarted) while this job ran; \
                 its result is lost",
            );
            ret.success = Some(Value::from(false));
            ret.retcode = Some(Value::from(1));
            ret.user = load.user.clone();
            ret.stamp = Some(brine_protocol::jid::stamp_now());
            self.send_return(ret.to_value(), &jid).await;
            self.procs.remove(&jid);
        }
    }

    async fn call_bounded(&self, ctx: &Context, fun: &str, arg: &[Value]) -> CallResult {
        match self.job_timeout {
            Some(t) => match tokio::time::timeout(t, functions::call(ctx, fun, arg)).await {
                Ok(r) => r,
                Err(_) => CallResult {
                    ret: Value::from(format!(
                        "ERROR: {fun} did not finish within job_timeout ({}s)",
                        t.as_secs()
                    )),
                    retcode: 1,
                    out: Some("nested".into()),
                    failure: None,
                },
            },
            None => functions::call(ctx, fun, arg).await,
        }
    }

    /// Run one scheduled job and, unless it says `return_job: False`, send its return to the
    /// master as Salt does: jid `req` (the master allocates one), or `nocache`.
    async fn run_scheduled(self: Arc<Self>, due: Due) {
        let item = &due.item;
        let fun = item
            .get("function")
            .and_then(|f| f.as_str())
            .unwrap_or("")
            .to_string();
        let mut args: Vec<Value> = match item.get("args") {
            Some(serde_json::Value::Array(a)) => {
                a.iter().map(brine_protocol::payload::from_json).collect()
            }
            _ => Vec::new(),
        };
        if let Some(serde_json::Value::Object(kw)) = item.get("kwargs") {
            if !kw.is_empty() {
                let mut m = vec![(Value::from("__kwarg__"), Value::Boolean(true))];
                m.extend(kw.iter().map(|(k, v)| {
                    (
                        Value::from(k.as_str()),
                        brine_protocol::payload::from_json(v),
                    )
                }));
                args.push(Value::Map(m));
            }
        }
        let jid = brine_protocol::jid::gen_jid();
        let ctx = Context {
            id: self.cfg.id.clone(),
            grains: self.grains(),
            running: self.running.clone(),
            pub_load: map(vec![
                ("fun", Value::from(fun.clone())),
                ("arg", Value::Array(args.clone())),
                ("jid", Value::from(jid.clone())),
                ("schedule", Value::from(due.name.clone())),
                ("tgt", Value::from(self.cfg.id.clone())),
            ]),
            pillar: self.services.pillar(),
            services: self.services.clone(),
        };
        let r = self.call_bounded(&ctx, &fun, &args).await;
        self.services.schedule.finished(&due.name);
        let return_job = item.get("return_job");
        if return_job == Some(&serde_json::Value::Bool(false)) {
            return;
        }
        let ret_jid = if return_job.and_then(|v| v.as_str()) == Some("nocache") {
            "nocache"
        } else {
            "req"
        };
        let mut ret = ReturnLoad::new(&self.cfg.id, ret_jid, Fun::One(fun), args);
        ret.ret = r.ret;
        ret.retcode = Some(Value::from(r.retcode));
        ret.success = Some(Value::from(r.retcode == 0));
        ret.out = r.out;
        ret.extra
            .push((Value::from("schedule"), Value::from(due.name.clone())));
        ret.extra
            .push((Value::from("pid"), Value::from(std::process::id())));
        if let Some(meta) = item.get("metadata") {
            ret.extra.push((
                Value::from("metadata"),
                brine_protocol::payload::from_json(meta),
            ));
        }
        ret.stamp = Some(brine_protocol::jid::stamp_now());
        self.send_return(ret.to_value(), &jid).await;
    }

    /// Once a second: start the scheduled jobs that are due and fire the beacons' events.
    async fn tick(self: &Arc<Self>) {
        let now = std::time::Instant::now();
        tracing::trace!("scheduler pass");
        for due in self.services.schedule.due(now) {
            tracing::debug!("schedule job {} starts", due.name);
            tokio::spawn(self.clone().run_scheduled(due));
        }
        // Beacons read files and may run `systemctl`: off the async workers.
        let (beacons, id) = (self.services.beacons.clone(), self.cfg.id.clone());
        let events = tokio::task::spawn_blocking(move || beacons.process(&id, now))
            .await
            .unwrap_or_default();
        if !events.is_empty() {
            tracing::debug!("{} beacon events", events.len());
            let events = events
                .into_iter()
                .map(|(tag, data)| {
                    let data = brine_protocol::payload::from_json(&serde_json::Value::Object(data));
                    (tag, data)
                })
                .collect();
            let ev = MinionEventLoad {
                id: self.cfg.id.clone(),
                events: MinionEvents::Batch {
                    events,
                    pretag: None,
                },
            };
            self.send_events(ev, "beacon events").await;
        }
    }

    /// Deliver a return, trying `return_retry_tries` times; from the first failure on it is
    /// kept in the outbox, which [`Self::drain_outbox`] empties once the master is back.
    async fn send_return(&self, ret: Value, jid: &str) {
        let tries = self.cfg.return_retry_tries.max(1);
        let mut kept: Option<PathBuf> = None;
        for n in 1..=tries {
            match self.request(ret.clone()).await {
                Ok(_) => {
                    if let Some(path) = kept {
                        self.outbox.release(&path, true);
                    }
                    return;
                }
                Err(e) => {
                    tracing::warn!("return of {jid} not delivered (try {n}/{tries}): {e}");
                    if kept.is_none() {
                        match self.outbox.keep(jid, &ret) {
                            Ok(path) => kept = Some(path),
                            Err(e) => tracing::error!("return of {jid} not kept: {e}"),
                        }
                    }
                    if n < tries {
                        tokio::time::sleep(self.retry_wait()).await;
                    }
                }
            }
        }
        match kept {
            Some(path) => {
                tracing::warn!(
                    "return of {jid} kept in {} until the master takes it",
                    path.display()
                );
                self.outbox.release(&path, false);
            }
            None => tracing::error!("return of {jid} dropped after {tries} tries"),
        }
    }

    /// `return_retry_timer`, plus up to `return_retry_timer_max` more at random, as Salt waits.
    fn retry_wait(&self) -> Duration {
        let base = self.cfg.return_retry_timer.max(1);
        let spread = self.cfg.return_retry_timer_max.saturating_sub(base);
        Duration::from_secs(base + rand::random::<u64>() % (spread + 1))
    }

    /// Deliver the returns of the outbox, oldest first, until one is refused (the master is
    /// still away); every `return_retry_timer` seconds while the minion runs.
    async fn drain_outbox(self: Arc<Self>) {
        loop {
            let outbox = &self.outbox;
            for path in outbox.waiting() {
                let Some(load) = outbox.load(&path) else {
                    continue;
                };
                match self.request(load).await {
                    Ok(_) => {
                        tracing::warn!("kept return {} delivered", path.display());
                        outbox.release(&path, true);
                    }
                    Err(e) => {
                        tracing::info!("kept returns wait: {e}");
                        break;
                    }
                }
            }
            tokio::time::sleep(Duration::from_secs(self.cfg.return_retry_timer.max(1))).await;
        }
    }
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Run the minion of one master until SIGTERM. Returns the process exit code.
pub async fn run(minion: Arc<Minion>, ctx: zmq::Context) -> i32 {
    sign_in_and_serve(minion, ctx, true).await
}

/// Sign in (waiting while the key is pending) and serve the master until SIGTERM; answer the
/// jobs a previous process left running when `left_over`. The process's exit code.
async fn sign_in_and_serve(minion: Arc<Minion>, ctx: zmq::Context, left_over: bool) -> i32 {
    let creds = match minion.sign_in(false).await {
        Ok(c) => c,
        Err(code) => return code.unwrap_or(1),
    };
    let watch = Watch {
        left_over,
        ..Watch::default()
    };
    match serve(minion, ctx, creds, watch).await {
        End::Exit(code) => code,
        End::Lost | End::Failback => 0,
    }
}

/// Run `work` until it ends (its exit code) or SIGTERM or Ctrl-C (0).
async fn until_stopped(work: impl std::future::Future<Output = i32>) -> i32 {
    let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    else {
        tracing::error!("cannot watch SIGTERM");
        return 1;
    };
    tokio::select! {
        code = work => code,
        _ = term.recv() => 0,
        _ = tokio::signal::ctrl_c() => 0,
    }
}

/// Hot multi-master (`master_type: str` with a list): one minion per master, each signed in
/// to its master, taking its jobs and returning to it; until SIGTERM.
async fn run_hot(cfg: MinionConfig, ctx: zmq::Context, config_dir: &Path) -> i32 {
    let mut tasks = Vec::new();
    // A job several masters publish (`brine_nats.jobs_subject`) runs once.
    let recent = Arc::new(RecentJids::default());
    for (i, named) in cfg.masters.iter().enumerate() {
        let outbox = cfg.cachedir.join(format!(
            "outbox-{}-{}",
            named.host.replace(['/', ':'], "_"),
            named.port
        ));
        let (cfg, ctx, named) = (cfg.clone(), ctx.clone(), named.clone());
        let config_dir = config_dir.to_path_buf();
        let recent = recent.clone();
        tasks.push(tokio::spawn(async move {
            // A master whose name does not resolve is given up; the others are served.
            let master = match resolve::master_addr(&cfg, &named, Patience::Configured).await {
                Ok(m) => m,
                Err(e) => {
                    tracing::error!("{e}");
                    return EXIT_UNRESOLVABLE;
                }
            };
            match Minion::for_master(cfg, &ctx, &config_dir, master, &outbox) {
                // Jobs a previous process left running are answered once, to the first master.
                Ok(m) => sign_in_and_serve(Arc::new(m.sharing_jids(&recent)), ctx, i == 0).await,
                Err(e) => {
                    eprintln!("salt-minion: {e}");
                    1
                }
            }
        }));
    }
    until_stopped(async {
        let mut worst = 0;
        for task in tasks {
            worst = worst.max(task.await.unwrap_or(1));
        }
        worst
    })
    .await
}

/// Failover (`master_type: failover`): signed in to one master of the list at a time, the
/// next one when it is lost (`master_alive_interval`), the first one again once it answers
/// (`master_failback`); until SIGTERM.
async fn run_failover(cfg: MinionConfig, ctx: zmq::Context, config_dir: &Path) -> i32 {
    let mut order = cfg.masters.clone();
    if cfg.random_master {
        use rand::seq::SliceRandom;
        order.shuffle(&mut rand::thread_rng());
    }
    // One outbox: returns a lost master did not take go to the next one.
    let outbox = cfg.cachedir.join("outbox");
    // A job the next master publishes again runs once.
    let recent = Arc::new(RecentJids::default());
    let serving = async {
        let mut start = 0;
        let mut first = true;
        loop {
            let mut connected = None;
            for k in 0..order.len() {
                let i = (start + k) % order.len();
                // A name that does not resolve now is passed over until the next round.
                let Ok(master) = resolve::master_addr(&cfg, &order[i], Patience::Once).await else {
                    continue;
                };
                let minion =
                    match Minion::for_master(cfg.clone(), &ctx, config_dir, master, &outbox) {
                        Ok(m) => Arc::new(m.sharing_jids(&recent)),
                        Err(e) => {
                            eprintln!("salt-minion: {e}");
                            return 1;
                        }
                    };
                match minion.sign_in(true).await {
                    Ok(creds) => {
                        connected = Some((i, minion, creds));
                        break;
                    }
                    Err(_) => tracing::warn!("master {} did not take this minion", order[i]),
                }
            }
            let Some((i, minion, creds)) = connected else {
                tracing::error!(
                    "No master could be reached or all masters denied the minion's connection \
                     attempt."
                );
                tokio::time::sleep(Duration::from_secs(cfg.acceptance_wait_time.max(1))).await;
                continue;
            };
            tracing::warn!("serving master {}", order[i]);
            let every = |secs: u64| (secs > 0).then(|| Duration::from_secs(secs));
            let watch = Watch {
                alive: every(cfg.master_alive_interval),
                failback: every(cfg.master_failback_interval)
                    .filter(|_| cfg.master_failback && i != 0)
                    .map(|d| (order[0].clone(), d)),
                left_over: first,
            };
            first = false;
            match serve(minion, ctx.clone(), creds, watch).await {
                End::Exit(code) => return code,
                End::Lost => {
                    tracing::warn!("master {} is gone: failing over", order[i]);
                    start = (i + 1) % order.len();
                }
                End::Failback => {
                    tracing::warn!("master {} answers again: going back to it", order[0]);
                    start = 0;
                }
            }
        }
    };
    until_stopped(serving).await
}

/// What a minion's service of one master looks out for besides jobs.
#[derive(Default)]
struct Watch {
    /// Check this often that the master still answers: [`End::Lost`] when it does not.
    alive: Option<Duration>,
    /// Check this often whether this master (the first of the list) answers again:
    /// [`End::Failback`] when it does.
    failback: Option<(MasterAddr, Duration)>,
    /// Answer the jobs a previous process left running.
    left_over: bool,
}

/// Why a minion's service of one master ended.
enum End {
    /// SIGTERM (0) or a failure: the process exits with this code.
    Exit(i32),
    Lost,
    Failback,
}

/// Whether `master` takes connections on its request port within a few seconds.
async fn answers(master: &MasterAddr) -> bool {
    let connect = tokio::net::TcpStream::connect((master.host.as_str(), master.port));
    matches!(
        tokio::time::timeout(Duration::from_secs(5), connect).await,
        Ok(Ok(_))
    )
}

/// A ticker for an optional period (never ticking without one).
async fn tick(every: &mut Option<tokio::time::Interval>) {
    match every {
        Some(t) => {
            t.tick().await;
        }
        None => std::future::pending::<()>().await,
    }
}

/// Serve one master with the credentials of a sign-in, until SIGTERM or what `watch` sees.
async fn serve(minion: Arc<Minion>, ctx: zmq::Context, creds: Creds, watch: Watch) -> End {
    let port = match minion.cfg.publish_port {
        Some(p) if p != minion.master.port => p,
        _ => creds.publish_port,
    };
    let endpoint = tcp_endpoint(&minion.master.host, port);
    let subs: Vec<Vec<u8>> = if minion.cfg.zmq_filtering {
        vec![
            b"broadcast".to_vec(),
            brine_protocol::crypt::hash_hex(minion.cfg.id.as_bytes(), HashType::Sha1).into_bytes(),
        ]
    } else {
        vec![Vec::new()]
    };
    let (tx, mut rx) = mpsc::unbounded_channel::<Vec<Vec<u8>>>();
    let recon = minion.cfg.recon_default.max(1) as i32;
    let recon = if minion.cfg.recon_randomize {
        recon + (rand::random::<u32>() % (minion.cfg.recon_max.max(1) as u32 + 1)) as i32
    } else {
        recon
    };
    let _sub = match Subscriber::start(
        &ctx,
        &endpoint,
        &subs,
        Some(minion.cfg.id.as_bytes()),
        recon,
        minion.cfg.recon_max.max(1) as i32,
        move |frames| {
            let _ = tx.send(frames);
        },
    ) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("cannot subscribe to {endpoint}: {e}");
            return End::Exit(1);
        }
    };
    minion.fetch_pillar().await;
    minion.start_events().await;
    if watch.left_over {
        // Listed before any job of this process can start (and write its own file).
        let left_over = minion.procs.left_over();
        tokio::spawn(minion.clone().answer_left_over_jobs(left_over));
    }
    let drain = tokio::spawn(minion.clone().drain_outbox());
    let _drain = AbortOnDrop(drain);
    tracing::warn!("minion {} is ready", minion.cfg.id);

    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(t) => t,
        Err(e) => {
            tracing::error!("cannot watch SIGTERM: {e}");
            return End::Exit(1);
        }
    };
    let mut serials = SerialGuard::default();
    let mut ticks = tokio::time::interval(Duration::from_secs(1));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let ticking = Arc::new(tokio::sync::Mutex::new(()));
    let every = |d: Duration| {
        let mut t = tokio::time::interval_at(tokio::time::Instant::now() + d, d);
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        t
    };
    let mut alive = watch.alive.map(every);
    let mut failback = watch.failback.as_ref().map(|(_, d)| every(*d));
    loop {
        let frames = tokio::select! {
            f = rx.recv() => match f { Some(f) => f, None => return End::Exit(1) },
            _ = tick(&mut alive) => {
                if !answers(&minion.master).await {
                    return End::Lost;
                }
                continue;
            }
            _ = tick(&mut failback) => {
                if let Some((first, _)) = &watch.failback {
                    if answers(first).await {
                        return End::Failback;
                    }
                }
                continue;
            }
            _ = ticks.tick() => {
                // One pass at a time: a slow beacon delays the next pass, never doubles it.
                if let Ok(guard) = ticking.clone().try_lock_owned() {
                    let m = minion.clone();
                    tokio::spawn(async move {
                        m.tick().await;
                        drop(guard);
                    });
                }
                continue;
            }
            _ = term.recv() => return End::Exit(0),
            _ = tokio::signal::ctrl_c() => return End::Exit(0),
        };
        // One frame, or [topic, payload] with zmq_filtering: the payload is the last frame.
        let Some(frame) = frames.last() else { continue };
        // Decrypt; if the AES key changed (master restart, key rotation), sign in again once
        // and decrypt the same publish with the new key.
        let mut load = None;
        let mut signed_in_again = false;
        loop {
            let creds = match minion.channel.creds() {
                Some(c) => c,
                None => {
                    if signed_in_again {
                        break;
                    }
                    signed_in_again = true;
                    let m = minion.clone();
                    let ok = tokio::task::spawn_blocking(move || {
                        m.channel
                            .sign_in(Duration::from_secs(m.cfg.auth_timeout.max(1)))
                    })
                    .await
                    .map(|r| r.is_ok())
                    .unwrap_or(false);
                    if !ok {
                        // Not accepted (e.g. our key was deleted): the publish is not for us.
                        break;
                    }
                    serials = SerialGuard::default();
                    continue;
                }
            };
            match minion.open_publish(&creds, frame, &mut serials) {
                Ok(l) => {
                    load = l;
                    break;
                }
                Err(()) if !signed_in_again => {
                    tracing::info!("publish does not decrypt; signing in again");
                    minion.channel.reset();
                }
                Err(()) => {
                    tracing::warn!("publish does not decrypt even after signing in again");
                    break;
                }
            }
        }
        let Some(load) = load else { continue };
        if !minion.targets_me(&load) {
            continue;
        }
        let jid = load.jid.clone();
        if !minion.recent.first_time(&jid) {
            tracing::debug!("duplicate publish of {jid} dropped");
            continue;
        }
        let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
        let m = minion.clone();
        let l = load.clone();
        let task = tokio::spawn(async move {
            let _ = go_rx.await;
            m.run_job(l).await;
        });
        minion.running.insert(
            &jid,
            RunningJob {
                load: load.to_value(),
                abort: Some(task.abort_handle()),
            },
        );
        let _ = go_tx.send(());
    }
}

/// Load the config, log, run. Returns the exit code.
pub fn main_with(config_dir: &Path, log_level: Option<&str>) -> i32 {
    // A minion makes a few private-key operations per sign-in: the `rsa` crate does them
    // well enough, and OpenSSL's code then never takes room in the minion's memory.
    brine_protocol::crypt::set_openssl(false);
    let cfg = match MinionConfig::load(config_dir) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("salt-minion: {e}");
            return 1;
        }
    };
    let console = log_level
        .and_then(brine_transport::logging::level)
        .or_else(|| brine_transport::logging::level(&cfg.log_level))
        .unwrap_or(tracing_subscriber::filter::LevelFilter::WARN);
    let file_level = brine_transport::logging::level(&cfg.log_level)
        .unwrap_or(tracing_subscriber::filter::LevelFilter::WARN);
    brine_transport::logging::init(console, Some((&cfg.log_file, file_level)));
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("salt-minion: {e}");
            return 1;
        }
    };
    let ctx = zmq::Context::new();
    let code = match (cfg.master_type, cfg.masters.len()) {
        (MasterType::Failover, _) => rt.block_on(run_failover(cfg, ctx, config_dir)),
        (MasterType::Str, 2..) => rt.block_on(run_hot(cfg, ctx, config_dir)),
        (MasterType::Str, _) => rt.block_on(async {
            match Minion::of_first_master(cfg, &ctx, config_dir).await {
                Ok(m) => run(Arc::new(m), ctx).await,
                // Logged, as when a master of a list does not resolve.
                Err(e @ NotStarted::Unresolvable(_)) => {
                    tracing::error!("{e}");
                    e.code()
                }
                Err(e) => {
                    eprintln!("salt-minion: {e}");
                    e.code()
                }
            }
        }),
    };
    rt.shutdown_timeout(Duration::from_secs(2));
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jid_runs_once_until_it_is_out_of_the_queue() {
        let recent = RecentJids::default();
        assert!(recent.first_time("20261128100000000001"));
        assert!(!recent.first_time("20261128100000000001"));
        for n in 0..JID_QUEUE {
            assert!(recent.first_time(&format!("x{n}")));
        }
        // The oldest went out when the queue was full: it would run again.
        assert!(recent.first_time("20261128100000000001"));
        assert!(!recent.first_time(&format!("x{}", JID_QUEUE - 1)));
    }
}
