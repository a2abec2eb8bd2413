//! Salt's `LocalClient`, once: publish a job through the master, then gather its returns from
//! the event bus, asking slow minions with `saltutil.find_job` whether they are still at it.
//!
//! `salt`, salt-api's `local*` clients and the master's runners all use it, and its batch
//! mode ([`batch`]); only how a publish reaches the master ([`Publish`]) and where events
//! come from ([`EventFeed`]) differ.
//! [`gather::Gather`] holds the one timeout policy, free of I/O.

pub mod batch;
pub mod gather;
pub mod link;

use brine_protocol::loads::{Fun, PublishRefused, PublishReply, PublishRequest, Tgt};
use brine_protocol::payload::Value;
use std::future::Future;
use tokio::sync::{broadcast, mpsc};
use tokio::time::Instant;

pub use batch::{Batch, BatchEvent, BatchSize};
pub use gather::{Gather, Step, Timeouts};
pub use link::MasterLink;

/// Why a job could not be published.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The master did not answer in time, or could not be reached.
    #[error("{0}")]
    Unavailable(String),
    /// The master answered something that is not a Salt reply.
    #[error("undecodable answer from the master: {0}")]
    Undecodable(String),
    /// The master refused the publish (authentication, a taken jid, ...).
    #[error(transparent)]
    Refused(#[from] PublishRefused),
}

/// How a publish reaches the master: over its ret port, or in-process inside the master.
pub trait Publish: Send + Sync {
    /// Send a `publish` (the implementation adds the caller's credentials).
    fn publish(
        &self,
        req: PublishRequest,
    ) -> impl Future<Output = Result<PublishReply, ClientError>> + Send;
}

/// What the gatherer needs to know of one bus event.
pub trait JobEvent {
    fn tag(&self) -> &str;
    /// A `saltutil.find_job` return that names a running job (a non-empty map).
    fn reports_running(&self) -> bool;
}

impl<T: JobEvent> JobEvent for std::sync::Arc<T> {
    fn tag(&self) -> &str {
        (**self).tag()
    }
    fn reports_running(&self) -> bool {
        (**self).reports_running()
    }
}

impl JobEvent for brine_transport::eventbus::Event {
    fn tag(&self) -> &str {
        &self.tag
    }
    fn reports_running(&self) -> bool {
        matches!(brine_protocol::payload::get(&self.data, "return"), Some(Value::Map(m)) if !m.is_empty())
    }
}

/// A stream of bus events, subscribed before the publish so that no return is missed.
pub trait EventFeed: Send {
    type Event: JobEvent + Send;
    /// The next event; `None` when the bus is gone.
    fn recv(&mut self) -> impl Future<Output = Option<Self::Event>> + Send;
}

impl<T: JobEvent + Clone + Send> EventFeed for broadcast::Receiver<T> {
    type Event = T;
    async fn recv(&mut self) -> Option<T> {
        loop {
            match broadcast::Receiver::recv(self).await {
                Ok(ev) => return Some(ev),
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!("a local client missed {n} events while gathering returns");
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }
}

impl<T: JobEvent + Send> EventFeed for mpsc::Receiver<T> {
    type Event = T;
    async fn recv(&mut self) -> Option<T> {
        mpsc::Receiver::recv(self).await
    }
}

impl<F: EventFeed> EventFeed for &mut F {
    type Event = F::Event;
    fn recv(&mut self) -> impl Future<Output = Option<Self::Event>> + Send {
        (**self).recv()
    }
}

/// Salt's `LocalClient` over one way of publishing.
pub struct LocalClient<P> {
    pub publisher: P,
}

impl<P: Publish> LocalClient<P> {
    pub fn new(publisher: P) -> LocalClient<P> {
        LocalClient { publisher }
    }

    /// Publish a job. A reply with no minions means nothing matched.
    pub async fn publish(&self, req: PublishRequest) -> Result<PublishReply, ClientError> {
        self.publisher.publish(req).await
    }

    /// Gather the returns of `job`, in arrival order, from `feed` (subscribed before the publish).
    pub fn returns<F: EventFeed>(
        &self,
        feed: F,
        job: &PublishReply,
        timeouts: Timeouts,
    ) -> Returns<'_, P, F> {
        Returns {
            client: self,
            feed,
            gather: Gather::new(&job.jid, &job.minions, timeouts, Instant::now().into_std()),
        }
    }
}

/// The returns of one job, as they arrive.
pub struct Returns<'a, P, F> {
    client: &'a LocalClient<P>,
    feed: F,
    gather: Gather,
}

impl<P: Publish, F: EventFeed> Returns<'_, P, F> {
    /// The next minion's return (its id and event), or `None` once every expected minion
    /// returned, the minions still missing are not running the job, or the hard stop passed.
    pub async fn next(&mut self) -> Option<(String, F::Event)> {
        loop {
            match self.gather.step(Instant::now().into_std()) {
                Step::Done => return None,
                Step::FindJob(missing) => {
                    let jid = self.gather.jid().to_string();
                    let req = find_job_request(missing, &jid);
                    let fjid = match self.client.publisher.publish(req).await {
                        Ok(reply) if !reply.minions.is_empty() => Some(reply.jid),
                        Ok(_) => None,
                        Err(e) => {
                            tracing::warn!("saltutil.find_job for {jid} not published: {e}");
                            None
                        }
                    };
                    self.gather
                        .find_job_published(fjid, Instant::now().into_std());
                }
                Step::Wait(until) => {
                    let ev = match tokio::time::timeout_at(until.into(), self.feed.recv()).await {
                        Ok(Some(ev)) => ev,
                        Ok(None) => {
                            self.gather.bus_closed();
                            continue;
                        }
                        Err(_) => continue,
                    };
                    let running = ev.reports_running();
                    if let Some(id) = self.gather.on_event(ev.tag(), running) {
                        return Some((id, ev));
                    }
                }
            }
        }
    }

    /// The expected minions that have not returned (yet).
    pub fn missing(&self) -> Vec<String> {
        self.gather.missing()
    }
}

/// `saltutil.find_job <jid>` to the minions that have not returned.
pub fn find_job_request(missing: Vec<String>, jid: &str) -> PublishRequest {
    let mut req = PublishRequest::new(
        Tgt::List(missing),
        Fun::One("saltutil.find_job".to_string()),
        vec![Value::from(jid)],
        "list",
    );
    req.kwargs.insert("delimiter", Value::from(":"));
    req
}
