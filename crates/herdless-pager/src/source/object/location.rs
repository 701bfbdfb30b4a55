//! Where an object is: its URL turned into an `object_store` client set
//! up from the standard environment (`AmazonS3Builder::from_env` and its
//! Google and Azure counterparts: `AWS_ENDPOINT_URL`, `AWS_REGION`,
//! `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_ALLOW_HTTP`, ...),
//! the path inside the store, and how the object is named in messages:
//! without the user, password, query or fragment a URL may carry, and with
//! every credential of the environment blanked out of the store's errors.

use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::http::HttpBuilder;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{ClientConfigKey, ObjectStore, ObjectStoreScheme, RetryConfig};
use url::Url;

use super::error::ObjectError;

/// Environment variables whose values are secrets: blanked out of every
/// message that leaves the source.
const SECRET_VARS: &[&str] = &[
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "GOOGLE_SERVICE_ACCOUNT_KEY",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_ACCESS_KEY",
    "AZURE_STORAGE_MASTER_KEY",
    "AZURE_STORAGE_SAS_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_STORAGE_TOKEN",
    "AZURE_CLIENT_SECRET",
];

/// `text` with every secret of the environment (and every credential
/// part of a URL found in it) replaced by `***`.
pub(crate) fn redact(text: &str) -> String {
    let mut out = text.to_string();
    for var in SECRET_VARS {
        if let Ok(secret) = std::env::var(var) {
            // A very short value would blank ordinary words; such a value
            // is no real credential anyway.
            if secret.len() >= 4 {
                out = out.replace(&secret, "***");
            }
        }
    }
    out
}

/// `url` as it may be shown: scheme, host and path only.
pub(crate) fn shown(url: &str) -> String {
    match Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            u.to_string()
        }
        // Not a URL: show its scheme and what follows up to any '?', '@'.
        Err(_) => {
            let cut = url.find(['?', '#']).unwrap_or(url.len());
            let s = &url[..cut];
            match (s.find("://"), s.rfind('@')) {
                (Some(i), Some(at)) if at > i => format!("{}{}", &s[..i + 3], &s[at + 1..]),
                _ => s.to_string(),
            }
        }
    }
}

/// Whether `s` names an object store rather than a local path: it starts
/// with a scheme the source reads (`s3://`, `s3a://`, `gs://`, `az://`,
/// `azure://`, `abfs://`, `abfss://`, `adl://`, `http://`, `https://`,
/// `file://`).
pub fn is_object_url(s: &str) -> bool {
    const SCHEMES: &[&str] = &[
        "s3", "s3a", "gs", "az", "azure", "abfs", "abfss", "adl", "http", "https", "file",
    ];
    s.split_once("://")
        .is_some_and(|(scheme, _)| SCHEMES.contains(&scheme.to_ascii_lowercase().as_str()))
}

/// An object's store client and path.
pub(crate) struct Location {
    pub(crate) store: Arc<dyn ObjectStore>,
    pub(crate) path: Path,
    /// The URL as shown (no credentials).
    pub(crate) shown: String,
}

/// How long one request may take before it is abandoned (and retried by
/// the fetcher).
pub(crate) struct Timeouts {
    pub(crate) request: Duration,
    pub(crate) connect: Duration,
    /// Settings over the environment's (`ObjectOptions::store_config`).
    pub(crate) config: Vec<(String, String)>,
}

impl Location {
    /// The store and path of `url`, the store set up from the
    /// environment. The store's own retries are off: the fetcher retries,
    /// counts and logs (`fetch.rs`).
    pub(crate) fn parse(url: &str, timeouts: &Timeouts) -> Result<Location, ObjectError> {
        let shown = shown(url);
        let bad = |reason: String| ObjectError::BadUrl {
            url: shown.clone(),
            reason: redact(&reason),
        };
        let parsed = Url::parse(url).map_err(|e| bad(format!("not a URL: {e}")))?;
        let (scheme, path) = ObjectStoreScheme::parse(&parsed).map_err(|e| bad(format!("{e}")))?;
        if path.as_ref().is_empty() {
            return Err(bad("names no object (the key is empty)".into()));
        }
        // Set key by key: the builders' client options hold what they read
        // from the environment (`AWS_ALLOW_HTTP`...), which replacing them
        // would lose.
        let ms = |d: Duration| format!("{}ms", d.as_millis().max(1));
        let client = [
            (ClientConfigKey::Timeout, ms(timeouts.request)),
            (ClientConfigKey::ConnectTimeout, ms(timeouts.connect)),
        ];
        let retry = RetryConfig {
            max_retries: 0,
            ..RetryConfig::default()
        };
        let store_err = |e: object_store::Error| ObjectError::Store {
            url: shown.clone(),
            reason: redact(&e.to_string()),
        };
        // A cloud store's builder: the environment, the URL, our client
        // settings, then the settings given over the environment's.
        macro_rules! cloud {
            ($builder:expr, $key:ident) => {{
                let mut b = $builder.with_url(url);
                for (k, v) in &client {
                    b = b.with_config($key::Client(*k), v.clone());
                }
                for (k, v) in &timeouts.config {
                    let key: $key = k.parse().map_err(store_err)?;
                    b = b.with_config(key, v.clone());
                }
                Arc::new(b.with_retry(retry).build().map_err(store_err)?)
            }};
        }
        // The TLS stack's crypto: rustls is built with `ring` only (see
        // Cargo.toml), and reqwest needs it installed as the process's
        // default before a client is built. Installing twice, or after the
        // embedding program chose its own, fails harmlessly.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let store: Arc<dyn ObjectStore> = match scheme {
            ObjectStoreScheme::AmazonS3 => cloud!(AmazonS3Builder::from_env(), AmazonS3ConfigKey),
            ObjectStoreScheme::GoogleCloudStorage => {
                cloud!(GoogleCloudStorageBuilder::from_env(), GoogleConfigKey)
            }
            ObjectStoreScheme::MicrosoftAzure => {
                cloud!(MicrosoftAzureBuilder::from_env(), AzureConfigKey)
            }
            ObjectStoreScheme::Http => {
                let base = &parsed[..url::Position::BeforePath];
                let mut b = HttpBuilder::new().with_url(base);
                for (k, v) in client.iter().cloned().chain(
                    timeouts
                        .config
                        .iter()
                        .map(|(k, v)| {
                            Ok::<_, ObjectError>((k.parse().map_err(store_err)?, v.clone()))
                        })
                        .collect::<Result<Vec<_>, _>>()?,
                ) {
                    b = b.with_config(k, v);
                }
                Arc::new(b.with_retry(retry).build().map_err(store_err)?)
            }
            ObjectStoreScheme::Local => Arc::new(LocalFileSystem::new()),
            other => return Err(bad(format!("{other:?} is not a store this source reads"))),
        };
        Ok(Location { store, path, shown })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_a_url_are_never_shown() {
        assert_eq!(
            shown("https://user:hunter22@example.com/b/k?sig=SECRET#x"),
            "https://example.com/b/k"
        );
        assert_eq!(shown("s3://bucket/key/of/it"), "s3://bucket/key/of/it");
        assert!(!shown("not a url://u:pw@h/p?token=T").contains("pw"));
    }

    #[test]
    fn object_urls_are_told_from_paths() {
        assert!(is_object_url("s3://b/k"));
        assert!(is_object_url("GS://b/k"));
        assert!(is_object_url("file:///var/tmp/x"));
        assert!(!is_object_url("/var/tmp/s3://x"));
        assert!(!is_object_url("vm.mem"));
    }

    #[test]
    fn a_url_without_a_key_is_refused() {
        let t = Timeouts {
            request: Duration::from_secs(1),
            connect: Duration::from_secs(1),
            config: Vec::new(),
        };
        let e = Location::parse("s3://bucket", &t)
            .err()
            .map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("names no object")));
    }
}
