//! Temporary profiling harness.
use dpml_accounting::PrivacyEvent;
use dpml_accounting::pld::PldAccountant;
fn main() {
    let steps: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let t = std::time::Instant::now();
    let pld = PldAccountant::pessimistic().pld(&PrivacyEvent::dp_sgd(1.1, 256.0 / 60000.0, steps)).unwrap();
    let t1 = t.elapsed();
    let e = pld.epsilon(1e-5).unwrap();
    eprintln!("total {:?} (+eps {:?}) eps {e}", t1, t.elapsed());
}
