use omr_light::*;
use std::time::Instant;
fn main() {
    let p = &OMR_LIGHT_V1;
    let t = Instant::now();
    let sks: Vec<_> = (0..8).map(|i| SecretKey::from_seed(p, [i as u8; 32])).collect();
    let keys: Vec<_> = sks.iter().map(|s| s.detection_key().expand()).collect();
    println!("keygen {:.1} ms/key", t.elapsed().as_secs_f64() * 1e3 / 8.0);
    let a = sks[0].address();
    let t = Instant::now();
    let clues: Vec<_> = (0..4096).map(|_| a.clue()).collect();
    println!("clue {:.1} us", t.elapsed().as_secs_f64() * 1e6 / 4096.0);
    let refs: Vec<_> = clues.iter().collect();
    drop(Batch::prepare(p, &refs[..1]));
    let t = Instant::now();
    let b = Batch::prepare(p, &refs);
    println!("shared {:.2} us/msg", t.elapsed().as_secs_f64() * 1e6 / 4096.0);
    for g in [1usize, 2, 4, 8] {
        let kr: Vec<_> = keys.iter().take(g).collect();
        let t = Instant::now();
        let _ = b.detect_many(&kr);
        println!("group {g}: {:.3} us/(msg,key)", t.elapsed().as_secs_f64() * 1e6 / 4096.0 / g as f64);
    }
    let part = DigestPart { first: 0, own: b.detect(&keys[0]), shared: b.shared().clone() };
    let t = Instant::now();
    for _ in 0..4 { let _ = sks[0].pertinent_in_with_range(&part, p.range); }
    println!("decode {:.2} ms/batch", t.elapsed().as_secs_f64() * 1e3 / 4.0);
}
