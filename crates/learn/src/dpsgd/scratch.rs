//! TEMPORARY tuning experiments (to be deleted).
use dpml_data::{LoadOptions, Source, train_test_split};
use dpml_mechanisms::DpRng;
use super::*;

fn env_f(name: &str, d: f64) -> f64 { std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(d) }

#[test]
#[ignore]
fn tune_digits() {
    let all = dpml_data::load(&"digits".parse::<Source>().unwrap(), &LoadOptions::default()).unwrap().train;
    let mut base = preset("digits-eps1").unwrap().config;
    base.epochs = env_f("EPOCHS", base.epochs);
    base.batch_size = env_f("B", base.batch_size as f64) as usize;
    base.lr = env_f("LR", base.lr as f64) as f32;
    base.max_grad_norm = env_f("C", base.max_grad_norm as f64) as f32;
    let ema = env_f("EMA", 0.99);
    base.ema = if ema > 0.0 { Some(ema as f32) } else { None };
    let mom = env_f("MOM", 0.9) as f32;
    base.optimizer = OptimizerKind::Sgd { momentum: mom, nesterov: false };
    if let Ok(h) = std::env::var("HIDDEN") {
        if h == "logreg" { base.model = "logreg".into(); base.hidden = vec![]; }
        else { base.hidden = h.split(',').map(|v| v.parse().unwrap()).collect(); }
    }
    if env_f("ADAM", 0.0) > 0.0 { base.optimizer = OptimizerKind::Adam; }
    if env_f("COS", 0.0) > 0.0 { base.lr_schedule = ScheduleKind::Cosine { min_lr: 0.0 }; }
    base.privacy = Privacy::TargetEpsilon(env_f("EPS", 1.0));
    let seeds = env_f("SEEDS", 5.0) as u64;
    let mut accs = Vec::new();
    let t = std::time::Instant::now();
    let mut sigma = 0.0;
    for s in 0..seeds {
        let (tr, te) = train_test_split(&all, 0.25, 100 + s).unwrap();
        let out = train(&base, &tr, Some(&te), &mut DpRng::seeded(s), &mut |_| {}).unwrap();
        accs.push(out.report.test_accuracy.unwrap());
        sigma = out.report.noise_multiplier.unwrap();
    }
    let mean = accs.iter().sum::<f64>() / accs.len() as f64;
    println!("RESULT model={} hidden={:?} B={} lr={} C={} ep={} ema={:?} sigma={sigma:.3} mean={mean:.4} min={:.4} secs/run={:.2}",
        base.model, base.hidden, base.batch_size, base.lr, base.max_grad_norm, base.epochs, base.ema,
        accs.iter().cloned().fold(1.0, f64::min), t.elapsed().as_secs_f64() / seeds as f64);
}
