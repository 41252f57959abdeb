//! `detect_device`: omr-light-v1 detected on a GPU through the service, on each store: three
//! recipients' digests exact while the batch grows, `/metrics` naming the device; then the card
//! fails mid-run (an injected failure) and detection carries on on the CPU, every digest still
//! exact and the failure reported. Where no GPU is found those tests print why and stop; the
//! refusals run everywhere: `cuda` for a TFHE set, `cuda` on a machine without a GPU, and
//! `auto` there starting on the CPU and saying so.

use omr_light::{SecretKey, OMR_LIGHT_V1};
use omr_light_cuda::CudaPass;
use omr_server::config::DetectDevice;
use omr_server::{Application, Config};
use omr_test_support::{
    light_message, quick_light, test_each_backend, RawClient, TestDb, TestServer,
};
use serde_json::Value;

test_each_backend!(
    light_digests_on_the_gpu_are_exact_and_survive_a_failing_card,
    without_a_gpu_cuda_is_refused_and_auto_detects_on_the_cpu,
);

/// Whether this machine has a usable GPU; if not, says so for `test`.
fn gpu_here(test: &str) -> bool {
    match CudaPass::open(0, 1 << 30) {
        Ok(pass) => {
            eprintln!("{test}: on {}", pass.info().name);
            true
        }
        Err(e) => {
            eprintln!("{test}: no usable GPU ({e})");
            false
        }
    }
}

/// A light server detecting on `device`.
async fn light_server(db: &TestDb, device: DetectDevice) -> TestServer {
    TestServer::start_configured(db, |c| {
        quick_light(c);
        c.allow_insecure_params = false;
        c.worker_threads = 2;
        c.detect_device = device;
    })
    .await
}

/// `omr_detect_device{device="…"}`.
async fn device_gauge(api: &RawClient, device: &str) -> Option<f64> {
    api.metric(&format!("omr_detect_device{{device=\"{device}\"}}"))
        .await
}

/// Post `count` messages from the board's head, message i to `addresses[to(i)]`, and return
/// the indices each address receives.
async fn post_to(
    api: &RawClient,
    addresses: &[omr_light::Address],
    count: u64,
    to: impl Fn(u64) -> usize,
    want: &mut [Vec<u64>],
) {
    let head = api.board(0, 1).await["head"].as_u64().unwrap();
    let messages: Vec<Value> = (head..head + count)
        .map(|i| {
            want[to(i)].push(i);
            light_message(&addresses[to(i)], format!("m{i}").as_bytes())
        })
        .collect();
    assert_eq!(api.post_all(messages).await, head);
}

async fn light_digests_on_the_gpu_are_exact_and_survive_a_failing_card(db: &TestDb) {
    if !gpu_here("gpu digests: SKIPPED") {
        return;
    }
    let s = light_server(db, DetectDevice::Cuda).await;
    let api = s.client();
    assert_eq!(device_gauge(&api, "cuda").await, Some(1.0));
    assert_eq!(device_gauge(&api, "cpu").await, Some(0.0));
    let rs = [
        api.register_light().await,
        api.register_light().await,
        api.register_light().await,
    ];
    let stranger = SecretKey::generate(&OMR_LIGHT_V1).address();
    let mut addresses = vec![stranger];
    addresses.extend(rs.iter().map(|r| r.secret.address()));
    let to = |i: u64| match i % 11 {
        0 => 1,
        4 | 9 => 2,
        7 => 3,
        _ => 0,
    };
    let mut want: Vec<Vec<u64>> = vec![Vec::new(); 4];
    // Two rounds on the GPU: the open batch detected again as it grows.
    for round in 0..2 {
        post_to(&api, &addresses, 40, to, &mut want).await;
        for (n, r) in rs.iter().enumerate() {
            let (start, end, got) = api.light_caught_up(r).await;
            assert_eq!((start, end), (0, 40 * (round + 1)));
            assert_eq!(got, want[n + 1], "round {round}, key {}", r.key_id);
        }
    }
    let passes = api.metric("omr_gpu_key_passes_total").await.unwrap();
    assert!(passes >= 6.0, "{passes} GPU passes");
    // Every key on the card (a key the worker loaded again is resident under its new number
    // too, until the budget evicts the old copy).
    let resident = api.metric("omr_gpu_resident_keys").await.unwrap();
    assert!(resident >= 3.0, "{resident} resident keys");
    // The card fails on the next pass: that pass and every later one run on the CPU.
    let state = s.state();
    let lane = state.scheme.gpu().expect("a GPU lane").clone();
    drop(state);
    lane.fail_next_pass();
    post_to(&api, &addresses, 30, to, &mut want).await;
    for (n, r) in rs.iter().enumerate() {
        let (start, end, got) = api.light_caught_up(r).await;
        assert_eq!((start, end), (0, 110));
        assert_eq!(got, want[n + 1], "after the failure, key {}", r.key_id);
    }
    assert!(!lane.is_active());
    assert_eq!(api.metric("omr_gpu_failures_total").await, Some(1.0));
    assert_eq!(device_gauge(&api, "cpu").await, Some(1.0));
    assert_eq!(device_gauge(&api, "cuda").await, Some(0.0));
}

async fn without_a_gpu_cuda_is_refused_and_auto_detects_on_the_cpu(db: &TestDb) {
    let dir = tempfile::tempdir().unwrap();
    let config = |set: &str, device: DetectDevice| {
        let mut c = Config {
            http_addr: "127.0.0.1:0".parse().unwrap(),
            grpc_addr: "127.0.0.1:0".parse().unwrap(),
            data_dir: db.data_dir().unwrap_or(dir.path()).to_path_buf(),
            database_url: db.data_dir().is_none().then(|| db.url().to_string()),
            ..Config::default()
        };
        c.param_set = Some(set.to_string());
        c.epoch_len = OMR_LIGHT_V1.batch as u64;
        c.detect_device = device;
        c
    };
    // A TFHE set has no GPU pass, GPU or not.
    let Err(err) = Application::build(config("omr-v2", DetectDevice::Cuda)).await else {
        panic!("detect_device = cuda with omr-v2 must not start");
    };
    let err = err.to_string();
    assert!(
        err.contains("omr-light-v1's pass only") && err.contains("omr-v2"),
        "{err}"
    );
    if gpu_here("refusals: the GPU-less cases SKIPPED") {
        return;
    }
    let Err(err) = Application::build(config(OMR_LIGHT_V1.name, DetectDevice::Cuda)).await else {
        panic!("detect_device = cuda without a GPU must not start");
    };
    let err = format!("{err:#}");
    assert!(
        err.contains("no usable GPU") && err.contains("detect_device = \"auto\""),
        "{err}"
    );
    // The refused starts touched no store: a light server starts on this one.
    let s = light_server(db, DetectDevice::Auto).await;
    let api = s.client();
    assert_eq!(device_gauge(&api, "cpu").await, Some(1.0));
    assert_eq!(device_gauge(&api, "cuda").await, Some(0.0));
    let r = api.register_light().await;
    let stranger = SecretKey::generate(&OMR_LIGHT_V1).address();
    let addresses = [stranger, r.secret.address()];
    let mut want = vec![Vec::new(); 2];
    post_to(&api, &addresses, 20, |i| usize::from(i % 3 == 1), &mut want).await;
    let (_, end, got) = api.light_caught_up(&r).await;
    assert_eq!((end, got), (20, want[1].clone()));
    assert_eq!(api.metric("omr_gpu_key_passes_total").await, Some(0.0));
}
