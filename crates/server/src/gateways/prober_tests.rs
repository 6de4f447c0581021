use super::*;
use herald_core::gateways::{Algorithm, Gateways, Health};
use std::collections::HashMap;
use std::sync::Mutex;

/// Answers each destination as the test says, and counts the probes.
#[derive(Default)]
struct Scripted {
    answers: Mutex<HashMap<String, PingOutcome>>,
    sent: Mutex<Vec<(String, Duration)>>,
}

impl Scripted {
    fn answer(&self, uri: &str, outcome: PingOutcome) {
        self.answers.lock().unwrap().insert(uri.into(), outcome);
    }

    fn sent_to(&self, uri: &str) -> usize {
        self.sent.lock().unwrap().iter().filter(|(u, _)| u == uri).count()
    }
}

impl ProbeSender for Scripted {
    fn probe(&self, uri: String, timeout: Duration) -> impl Future<Output = PingOutcome> + Send {
        let outcome = self.answers.lock().unwrap().get(&uri).copied().unwrap_or(PingOutcome::Answered(200));
        self.sent.lock().unwrap().push((uri, timeout));
        async move {
            if outcome == PingOutcome::TimedOut {
                std::future::pending::<()>().await;
            }
            outcome
        }
    }
}

const GW1: &str = "sip:192.0.2.1";
const GW2: &str = "sip:192.0.2.2";
const GW3: &str = "sip:192.0.2.3";

fn set(rules: HealthRules) -> Arc<GatewaySet> {
    let now = Instant::now();
    let dest = |uri: &str| Destination { uri: uri.into(), weight: 1, priority: 0, health: Arc::new(Health::new(now)) };
    let mut s = GatewaySet::new("pstn", Algorithm::RoundRobin, vec![dest(GW1), dest(GW2), dest(GW3)]);
    s.health = rules;
    Gateways::new(vec![s], None).get("pstn").unwrap().clone()
}

fn probing(interval_ms: u64) -> GatewayProbing {
    GatewayProbing { enabled: true, interval_ms, timeout_ms: interval_ms / 2, failed_statuses: vec![408, 503] }
}

fn up(set: &GatewaySet, i: usize) -> bool {
    set.destinations[i].health.is_up()
}

async fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !f() {
        assert!(Instant::now() < deadline, "not reached in 5 s: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn any_answer_but_the_failed_statuses_keeps_a_destination_up() {
    let rules = HealthRules { probe_failures_down: 2, call_failures_down: 0, probe_successes_up: 2 };
    let s = set(rules);
    let pinger = Arc::new(Scripted::default());
    pinger.answer(GW1, PingOutcome::Answered(404));
    pinger.answer(GW2, PingOutcome::Answered(503));
    pinger.answer(GW3, PingOutcome::TimedOut);
    let prober = Prober::start(&Handle::current(), vec![(s.clone(), probing(100))], pinger.clone());
    until("gw2 and gw3 down", || !up(&s, 1) && !up(&s, 2)).await;
    let (started, sent) = (Instant::now(), pinger.sent_to(GW1));
    until("three more probes of gw1", || pinger.sent_to(GW1) >= sent + 3).await;
    assert!(up(&s, 0), "a 404 is an answer: alive");
    assert!(started.elapsed() >= Duration::from_millis(150), "probes are an interval apart");
    let snap = s.destinations[1].health.snapshot();
    assert_eq!((snap.changes, snap.probes_ok), (1, 0));
    assert!(snap.probes_failed >= 2);
    // Every probe carries the set's timeout to the engine.
    assert!(pinger.sent.lock().unwrap().iter().all(|(_, t)| *t == Duration::from_millis(50)));
    drop(prober);
}

#[tokio::test]
async fn a_down_destination_comes_back_after_k_good_probes() {
    let rules = HealthRules { probe_failures_down: 1, call_failures_down: 0, probe_successes_up: 3 };
    let s = set(rules);
    let pinger = Arc::new(Scripted::default());
    pinger.answer(GW1, PingOutcome::TransportError);
    let _prober = Prober::start(&Handle::current(), vec![(s.clone(), probing(100))], pinger.clone());
    until("gw1 down", || !up(&s, 0)).await;
    let probes_when_down = pinger.sent_to(GW1);
    pinger.answer(GW1, PingOutcome::Answered(200));
    until("gw1 up", || up(&s, 0)).await;
    // Down after one probe, so the three good ones came after it.
    assert!(pinger.sent_to(GW1) >= probes_when_down + 3, "{} probes", pinger.sent_to(GW1));
    assert_eq!(s.destinations[0].health.snapshot().changes, 2);
}

#[tokio::test]
async fn stopping_ends_the_probes_and_a_set_without_probing_gets_none() {
    let s = set(HealthRules::default());
    let pinger = Arc::new(Scripted::default());
    let mut off = probing(100);
    off.enabled = false;
    let other = set(HealthRules::default());
    let prober =
        Prober::start(&Handle::current(), vec![(s.clone(), probing(100)), (other.clone(), off)], pinger.clone());
    until("a probe of each destination", || [GW1, GW2, GW3].iter().all(|g| pinger.sent_to(g) > 0)).await;
    prober.stop();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let sent = pinger.sent.lock().unwrap().len();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(pinger.sent.lock().unwrap().len(), sent, "no probe after stop");
    // The set with probing off was never probed: its health is untouched.
    assert!(other.destinations.iter().all(|d| d.health.snapshot().probes_ok == 0));
}
