//! The configuration's keys, the order of its sources, and its start-up checks.

use super::*;

#[test]
fn keys_list_every_field() {
    let mut v = serde_json::to_value(Config::default()).unwrap();
    v["database_url"] = serde_json::json!("x");
    v["worker_id"] = serde_json::json!("x");
    v["max_cached_keys"] = serde_json::json!(1);
    v["retain_messages"] = serde_json::json!(1);
    v["retain_digest_messages"] = serde_json::json!(1);
    v["key_disk_bytes"] = serde_json::json!(1);
    v["admin_token_file"] = serde_json::json!("x");
    v["tls_cert"] = serde_json::json!("x");
    v["tls_key"] = serde_json::json!("x");
    // Never serialized (it is a secret), but a key all the same.
    v["admin_token"] = serde_json::json!("x");
    let mut fields: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
    fields.sort();
    let mut keys: Vec<String> = KEYS.iter().map(|k| k.to_string()).collect();
    keys.sort();
    assert_eq!(fields, keys);
}

#[test]
#[allow(clippy::result_large_err)] // figment's Jail API returns its own large error
fn file_then_environment_override_defaults() {
    figment::Jail::expect_with(|jail| {
        jail.create_file(
            "omrd.toml",
            "http_addr = \"127.0.0.1:9000\"\nmax_batch_messages = 7\n",
        )?;
        jail.set_env("OMR_MAX_BATCH_MESSAGES", "9");
        jail.set_env("OMR_TEST_SOMETHING_ELSE", "ignored");
        jail.set_env("OMR_POSTAGE_BITS", "20");
        jail.set_env("OMR_TRUSTED_PROXIES", "[\"10.0.0.0/8\", \"::1\"]");
        jail.set_env("OMR_RATE_LIMIT_PER_SECOND", "2");
        let c = Config::load(Some(Path::new("omrd.toml"))).map_err(|e| e.to_string())?;
        assert_eq!(c.http_addr.port(), 9000);
        assert_eq!(c.max_batch_messages, 9);
        assert_eq!(c.postage_bits, 20);
        assert_eq!(c.grpc_addr, Config::default().grpc_addr);
        assert_eq!(c.trusted_proxies, ["10.0.0.0/8", "::1"]);
        assert_eq!(c.rate_limit_per_second, 2.0);
        jail.create_file("bad.toml", "htp_addr = 1\n")?;
        assert!(
            Config::load(Some(Path::new("bad.toml"))).is_err(),
            "typo in a file key accepted"
        );
        assert!(Config::load(Some(Path::new("missing.toml"))).is_err());
        Ok(())
    });
}

#[test]
#[allow(clippy::result_large_err)] // figment's Jail API returns its own large error
fn the_admin_token_comes_from_the_environment_or_a_file_and_is_never_shown() {
    figment::Jail::expect_with(|jail| {
        let secret = "0123456789abcdef-secret";
        jail.set_env("OMR_ADMIN_TOKEN", secret);
        jail.set_env("OMR_REGISTRATION", "invite");
        let c = Config::load(None).map_err(|e| e.to_string())?;
        assert_eq!(c.registration, Registration::Invite);
        let token = c.resolve_admin_token().unwrap().expect("a token");
        assert_eq!(token, AdminToken::new(secret));
        assert!(!format!("{c:?}").contains(secret), "Debug shows the token");
        let json = serde_json::to_string(&c).unwrap();
        assert!(!json.contains(secret), "serialized: {json}");

        jail.create_file("token", &format!("{secret}\n"))?;
        jail.set_env("OMR_ADMIN_TOKEN_FILE", "token");
        let c = Config::load(None).map_err(|e| e.to_string())?;
        assert!(c.resolve_admin_token().is_err(), "both set");
        jail.clear_env();
        jail.set_env("OMR_ADMIN_TOKEN_FILE", "token");
        let c = Config::load(None).map_err(|e| e.to_string())?;
        assert_eq!(
            c.resolve_admin_token().unwrap(),
            Some(AdminToken::new(secret))
        );

        jail.create_file("short", "abc\n")?;
        jail.set_env("OMR_ADMIN_TOKEN_FILE", "short");
        let c = Config::load(None).map_err(|e| e.to_string())?;
        let err = c.resolve_admin_token().unwrap_err().to_string();
        assert!(err.contains("openssl rand"), "{err}");
        jail.set_env("OMR_ADMIN_TOKEN_FILE", "missing");
        let c = Config::load(None).map_err(|e| e.to_string())?;
        assert!(c.resolve_admin_token().is_err(), "a missing file");
        jail.clear_env();
        assert_eq!(
            Config::load(None).unwrap().resolve_admin_token().unwrap(),
            None
        );
        jail.set_env("OMR_ADMIN_TOKEN", "");
        assert_eq!(
            Config::load(None).unwrap().resolve_admin_token().unwrap(),
            None
        );
        Ok(())
    });
}

#[test]
fn the_default_configuration_is_valid() {
    let set = Config::default().validate().unwrap();
    assert_eq!(set.name(), omr_api::param_sets::DEFAULT_PARAM_SET);
    assert_eq!(
        Config::default().param_set,
        None,
        "unset: the store's set or the default"
    );
}

/// The one list of parameter sets that help texts and errors quote names the sets omrd runs,
/// each secure.
#[test]
fn every_listed_parameter_set_is_a_secure_set_omrd_runs() {
    for name in omr_api::param_sets::PARAM_SETS {
        let set = crate::set::Set::by_name(name).unwrap_or_else(|| panic!("{name} is not a set"));
        assert!(!set.insecure(), "{name} is listed but insecure");
    }
}

#[test]
fn an_insecure_parameter_set_is_refused_unless_allowed() {
    let mut c = Config {
        param_set: Some(omr_core::INSECURE_TEST.name.to_string()),
        ..Config::default()
    };
    let err = c.validate().unwrap_err().to_string();
    assert!(err.contains("is insecure"), "{err}");
    assert!(err.contains("--allow-insecure-params"), "{err}");
    c.allow_insecure_params = true;
    assert_eq!(c.validate().unwrap().name(), omr_core::INSECURE_TEST.name);
}

#[test]
fn an_unknown_parameter_set_is_refused() {
    let c = Config {
        param_set: Some("omr-v0".to_string()),
        ..Config::default()
    };
    let err = format!("{:#}", c.validate().unwrap_err());
    assert!(err.contains("parameter set \"omr-v0\""), "{err}");
}

#[test]
fn postage_and_attachments_over_their_maximums_are_refused() {
    let mut c = Config {
        postage_bits: omr_core::MAX_POSTAGE_BITS,
        ..Config::default()
    };
    c.validate().unwrap();
    c.postage_bits = omr_core::MAX_POSTAGE_BITS + 1;
    let err = c.validate().unwrap_err().to_string();
    assert!(
        err.contains("postage_bits = 33 is over the maximum of 32"),
        "{err}"
    );

    let mut c = Config {
        max_attachment_bytes: Some(crate::epochs::MAX_ATTACHMENT_BYTES + 1),
        ..Config::default()
    };
    let err = c.validate().unwrap_err().to_string();
    assert!(
        err.contains("max_attachment_bytes = 65537 is over"),
        "{err}"
    );
    c.max_attachment_bytes = Some(0);
    c.validate().unwrap();
}

#[test]
fn omr_light_v1_runs_one_batch_per_epoch() {
    let mut c = Config {
        param_set: Some("omr-light-v1".into()),
        epoch_len: 1024,
        ..Config::default()
    };
    let err = c.validate().unwrap_err().to_string();
    assert!(err.contains("set epoch_len = 4096"), "{err}");
    c.epoch_len = 4096;
    assert_eq!(c.validate().unwrap().name(), "omr-light-v1");
    c.param_set = Some("omr-light-v9".into());
    let err = format!("{:#}", c.validate().unwrap_err());
    assert!(
        err.contains("known: omr-v2 (the default), omr-v1, omr-light-v1"),
        "{err}"
    );
}

/// Attachments by default on the TFHE lane, not on the light one (whose PIR records are whole
/// messages); a value set is kept on either.
#[test]
fn attachments_default_by_lane() {
    let mut c = Config::default();
    assert_eq!(c.attachment_limit(), 64 * 1024);
    c.param_set = Some("omr-light-v1".into());
    assert_eq!(c.attachment_limit(), 0);
    c.max_attachment_bytes = Some(1024);
    assert_eq!(c.attachment_limit(), 1024);
    c.param_set = Some("omr-v2".into());
    assert_eq!(c.attachment_limit(), 1024);
}

/// `cors_allowed_origins`: off by default; origins as a browser sends them, or "*" alone.
#[test]
fn cors_origins_are_checked() {
    use super::CorsOrigins;
    let mut c = Config::default();
    assert_eq!(c.cors_origins().unwrap(), CorsOrigins::Off);
    c.cors_allowed_origins = vec![
        "https://wallet.example".into(),
        "http://127.0.0.1:8000".into(),
    ];
    assert!(matches!(c.cors_origins().unwrap(), CorsOrigins::List(l) if l.len() == 2));
    c.validate().unwrap();
    c.cors_allowed_origins = vec!["*".into()];
    assert_eq!(c.cors_origins().unwrap(), CorsOrigins::Any);
    for bad in [
        "wallet.example",
        "https://wallet.example/",
        "ftp://x",
        "https://",
        "*.x",
    ] {
        c.cors_allowed_origins = vec![bad.into()];
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("is not an origin"), "{bad}: {err}");
    }
    c.cors_allowed_origins = vec!["*".into(), "https://a.example".into()];
    let err = c.validate().unwrap_err().to_string();
    assert!(err.contains("stands alone"), "{err}");
}
