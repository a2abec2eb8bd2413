//! `salt-call` through the master: sign in once with the minion's key, fetch the minion's
//! pillar, run one function with the master's file server behind it, and return the result to
//! the master as a job of its own (jid `req`), as Salt's salt-call does.

use std::sync::Arc;
use std::time::Duration;

use brine_protocol::loads::{Fun, ReturnLoad};
use brine_protocol::payload::{map, Value};

use crate::channel::ChannelError;
use crate::daemon::{Minion, EXIT_FINGER, EXIT_REJECTED};
use crate::functions::{self, CallResult, Context};

/// Why salt-call stops before running the function: the message Salt prints and its exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub message: String,
    pub code: i32,
}

/// Salt's salt-call exit code when the master does not take the minion's key.
const EXIT_NOT_ACCEPTED: i32 = 2;

/// Run `fun` with `args` (already parsed from `argv`) as `salt-call` does without `--local`:
/// `argv` is kept as typed for the return's `fun_args`; `return_event` sends the return to the
/// master (salt-call's `--no-return-event` turns it off).
pub async fn call(
    minion: &Minion,
    fun: &str,
    args: &[Value],
    argv: &[String],
    return_event: bool,
) -> Result<CallResult, Refused> {
    let ch = minion.channel.clone();
    let auth_timeout = Duration::from_secs(minion.cfg.auth_timeout.max(1));
    let signed = tokio::task::spawn_blocking(move || ch.sign_in(auth_timeout))
        .await
        .unwrap_or(Err(ChannelError::NotSignedIn));
    match signed {
        Ok(_) => {}
        Err(ChannelError::Rejected) => {
            return Err(Refused {
                message: "The Salt Master has rejected this minion's public key!\n\
                          To repair this issue, delete the public key for this minion on the \
                          Salt Master and restart this minion.\n\
                          Or restart the Salt Master in open mode to clean out the keys. \
                          The Salt Minion will now exit."
                    .into(),
                code: EXIT_REJECTED,
            })
        }
        Err(ChannelError::FingerMismatch) => {
            return Err(Refused {
                message: "The master fingerprint does not match master_finger".into(),
                code: EXIT_FINGER,
            })
        }
        Err(e) => {
            tracing::info!("sign-in to {} failed: {e}", minion.master);
            return Err(Refused {
                message: "Minion failed to authenticate with the master, has the minion key \
                          been accepted?"
                    .into(),
                code: EXIT_NOT_ACCEPTED,
            });
        }
    }
    minion.fetch_pillar().await;
    let jid = brine_protocol::jid::gen_jid();
    let ctx = Context {
        id: minion.cfg.id.clone(),
        grains: minion.grains(),
        running: minion.running.clone(),
        pub_load: map(vec![
            ("fun", Value::from(fun)),
            ("pid", Value::from(std::process::id())),
            ("jid", Value::from(jid)),
            ("tgt", Value::from("salt-call")),
        ]),
        pillar: minion.services.pillar(),
        services: Arc::clone(&minion.services),
    };
    let r = functions::call(&ctx, fun, args).await;
    // Salt's caller stops at a failure before it returns anything to the master.
    if return_event && r.failure.is_none() {
        let mut ret = ReturnLoad::new(
            &minion.cfg.id,
            "req",
            Fun::One(fun.to_string()),
            argv.iter().map(|a| Value::from(a.as_str())).collect(),
        );
        ret.ret = r.ret.clone();
        ret.retcode = Some(Value::from(r.retcode));
        ret.out = r.out.clone();
        if let Err(e) = minion.request(ret.to_value()).await {
            // Salt's salt-call ignores a return the master did not take.
            tracing::warn!("the return of {fun} was not delivered to the master: {e}");
        }
    }
    Ok(r)
}
