//! What the tools share: the master's config, its root key, a request channel to its ret
//! port and a reader of its event bus (the tools run on the master's host, as Salt's do).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use brine_client::link::{local_host, LinkPublisher, MasterLink};
use brine_client::{ClientError, LocalClient};
use brine_protocol::config::MasterConfig;
use brine_protocol::loads::PublishRefused;
use brine_protocol::payload::{get, get_str, Value};
use brine_transport::eventbus::{Event, EventListener};
use tokio::sync::mpsc;

pub struct Local {
    pub cfg: MasterConfig,
    pub user: String,
    pub link: Arc<MasterLink>,
}

/// A failure the tools report in one line and turn into an exit code.
#[derive(Debug)]
pub struct CliError {
    pub msg: String,
    pub code: i32,
}

impl CliError {
    pub fn new(msg: impl Into<String>, code: i32) -> CliError {
        CliError {
            msg: msg.into(),
            code,
        }
    }
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.msg)
    }
}

/// The name of the user running the tool (Salt puts it in `user`).
pub fn current_user() -> String {
    std::env::var("SUDO_USER")
        .map(|u| format!("sudo_{u}"))
        .or_else(|_| std::env::var("USER"))
        .unwrap_or_else(|_| "root".to_string())
}

impl Local {
    pub fn open(config_dir: &Path) -> Result<Local, CliError> {
        let cfg = MasterConfig::load(config_dir).map_err(|e| CliError::new(e.to_string(), 1))?;
        let user = current_user();
        let key_user = if user == "root" || user.starts_with("sudo_") {
            "root".to_string()
        } else {
            user.clone()
        };
        let link = Arc::new(MasterLink::new(
            local_host(&cfg.interface),
            cfg.ret_port,
            &cfg.cachedir,
            &key_user,
        ));
        Ok(Local { cfg, user, link })
    }

    /// A clear request to the master; the decoded reply.
    pub fn clear(&self, load: Value, timeout: Duration) -> Result<Value, CliError> {
        let v = self
            .link
            .clear_blocking(load, timeout)
            .map_err(request_error)?;
        if let Some(e) = get(&v, "error") {
            let msg = get_str(e, "message")
                .map(str::to_string)
                .or_else(|| match e {
                    Value::String(s) => s.as_str().map(str::to_string),
                    _ => None,
                })
                .unwrap_or_else(|| e.to_string());
            return Err(CliError::new(msg, 1));
        }
        if v == Value::from("bad load") {
            return Err(CliError::new(
                "The master refused the request (bad load)",
                1,
            ));
        }
        Ok(v)
    }

    pub fn listen(&self) -> Result<EventListener, CliError> {
        EventListener::connect(&self.cfg.sock_dir).map_err(|e| {
            CliError::new(
                format!(
                    "Unable to connect to the master's event bus in {}: {e}",
                    self.cfg.sock_dir.display()
                ),
                2,
            )
        })
    }

    /// The master's events for a [`brine_client::LocalClient`]: connected now (so that no
    /// return of a job published next is missed), read on a thread of their own.
    pub fn feed(&self) -> Result<mpsc::Receiver<Arc<Event>>, CliError> {
        let mut listener = self.listen()?;
        let (tx, rx) = mpsc::channel(1024);
        std::thread::spawn(move || loop {
            match listener.next(Duration::from_millis(500)) {
                Ok(Some(ev)) => {
                    if tx.blocking_send(Arc::new(ev)).is_err() {
                        return;
                    }
                }
                Ok(None) if tx.is_closed() => return,
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!("event bus: {e}");
                    return;
                }
            }
        });
        Ok(rx)
    }

    /// The local client the tools publish jobs with, as this user.
    pub fn client(&self) -> LocalClient<LinkPublisher> {
        LocalClient::new(self.link.as_user(&self.user))
    }

    /// The one gather policy, with the timeout the user gave (or the master's).
    pub fn timeouts(&self, timeout: Option<u64>) -> brine_client::Timeouts {
        brine_client::Timeouts::from_secs(
            timeout.unwrap_or(self.cfg.timeout),
            self.cfg.gather_job_timeout,
            self.cfg.gather_hard_stop,
        )
    }

    /// The highstate outputter's settings: the master's `state_*` options, then the
    /// command line's `--state-output`, `--state-verbose` and `--output-diff`.
    pub fn state_output(
        &self,
        mode: Option<&str>,
        verbose: Option<&str>,
        diff: bool,
    ) -> crate::output::StateOutput {
        crate::output::StateOutput {
            mode: mode.unwrap_or(&self.cfg.state_output).to_string(),
            // Salt reads "True"/"true" and "False"/"false"; any other text is truthy.
            verbose: match verbose {
                None => self.cfg.state_verbose,
                Some("False" | "false") => false,
                Some(v) => !v.is_empty(),
            },
            profile: self.cfg.state_output_profile,
            diff: diff || self.cfg.state_output_diff,
            pct: self.cfg.state_output_pct,
        }
    }

    /// The fields every clear command from a tool carries.
    pub fn auth_fields(&self) -> Vec<(&'static str, Value)> {
        vec![
            ("key", Value::from(self.link.key())),
            ("user", Value::from(self.user.clone())),
        ]
    }
}

/// A request the master did not answer, in Salt's words.
pub fn request_error(e: ClientError) -> CliError {
    match e {
        ClientError::Unavailable(_) => CliError::new(
            "Salt request timed out. The master is not responding. You may need to run your \
             command with `--async` in order to bypass the congested event bus. With \
             `--async`, the CLI tool will print the job id (jid) and exit immediately without \
             listening for responses. You can then use `salt-run jobs.lookup_jid` to look up \
             the results of the job in the job cache later.",
            2,
        ),
        ClientError::Undecodable(e) => {
            CliError::new(format!("undecodable answer from the master: {e}"), 2)
        }
        ClientError::Refused(PublishRefused::Error { message, .. }) => CliError::new(message, 1),
        ClientError::Refused(PublishRefused::NoJob(m)) => CliError::new(m, 1),
    }
}

/// Wait for the first event whose tag is `tag`, up to `timeout`.
pub fn wait_for(
    listener: &mut EventListener,
    tag: &str,
    timeout: Duration,
) -> Result<Option<Event>, CliError> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        match listener.next(left) {
            Ok(Some(ev)) if ev.tag == tag => return Ok(Some(ev)),
            Ok(Some(_)) => {}
            Ok(None) => return Ok(None),
            Err(e) => return Err(CliError::new(format!("event bus: {e}"), 2)),
        }
    }
}

/// Salt's `yamlify_arg` for command-line arguments (the minion's, one implementation):
/// numbers, booleans, null, quoted strings, `[lists]` and `{maps}` written in YAML become
/// those values; anything else stays the string given.
pub fn yamlify(arg: &str) -> Value {
    brine_minion::functions::yamlify_arg(arg)
}

/// Split command-line words into positional args and `key=value` kwargs, Salt's way: a word
/// `name=value` whose name is an identifier is a kwarg; the kwargs travel as a trailing map
/// with `__kwarg__: true`.
pub fn parse_args(words: &[String]) -> Vec<Value> {
    let kw_re = regex_lite_kwarg();
    let mut args = Vec::new();
    let mut kwargs: Vec<(Value, Value)> = Vec::new();
    for w in words {
        match kw_re(w) {
            Some((k, v)) => kwargs.push((Value::from(k), yamlify(v))),
            None => args.push(yamlify(w)),
        }
    }
    if !kwargs.is_empty() {
        let mut m = vec![(Value::from("__kwarg__"), Value::from(true))];
        m.extend(kwargs);
        args.push(Value::Map(m));
    }
    args
}

/// `^([^\d\W][\w.-]*)=(?!=)(.*)$` as a function.
fn regex_lite_kwarg() -> impl Fn(&str) -> Option<(&str, &str)> {
    |w: &str| {
        let (k, v) = w.split_once('=')?;
        let mut chars = k.chars();
        let first = chars.next()?;
        if !(first.is_alphabetic() || first == '_') {
            return None;
        }
        if !chars.all(|c| c.is_alphanumeric() || c == '_' || c == '.' || c == '-') {
            return None;
        }
        if v.starts_with('=') {
            return None;
        }
        Some((k, v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_like_salt() {
        let words: Vec<String> = [
            "a",
            "1",
            "foo=bar",
            "baz={\"x\": 1}",
            "x==y",
            "2_000",
            "None",
            "true",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let v = parse_args(&words);
        assert_eq!(v[0], Value::from("a"));
        assert_eq!(v[1], Value::from(1));
        assert_eq!(v[2], Value::from("x==y"));
        assert_eq!(v[3], Value::from("2_000"));
        assert_eq!(v[4], Value::Nil);
        assert_eq!(v[5], Value::from(true));
        let kw = &v[6];
        assert_eq!(get(kw, "__kwarg__"), Some(&Value::from(true)));
        assert_eq!(get_str(kw, "foo"), Some("bar"));
        assert_eq!(get(get(kw, "baz").unwrap(), "x"), Some(&Value::from(1)));
    }
}
