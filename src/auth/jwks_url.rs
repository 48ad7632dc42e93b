//! Fetching an issuer's JWKS over HTTPS: one GET, bounded in time and size, redirects only
//! within the same origin.

use std::time::Duration;

use reqwest::Url;

/// The largest JWKS document accepted; issuers publish a few keys, a few KiB.
pub const MAX_JWKS_BYTES: usize = 1024 * 1024;

/// A whole fetch (connect, redirects, body) gives up after this.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

const MAX_REDIRECTS: usize = 5;

/// Why a JWKS URL was refused or a fetch failed. Shows the URL without user info or query.
#[derive(Debug, thiserror::Error)]
pub enum JwksUrlError {
    #[error("the JWKS URL is not a valid absolute URL")]
    Invalid,
    #[error("the JWKS URL {0} must use https (http is accepted only for a loopback address)")]
    NotHttps(String),
    #[error("fetching the JWKS from {url} failed: {reason}")]
    Fetch { url: String, reason: String },
}

/// A JWKS endpoint and the client that fetches it.
pub struct JwksUrl {
    url: Url,
    client: reqwest::Client,
}

/// The URL as logs may show it: no user info, no query, no fragment.
fn shown(url: &Url) -> String {
    let mut u = url.clone();
    let _ = u.set_username("");
    let _ = u.set_password(None);
    u.set_query(None);
    u.set_fragment(None);
    u.to_string()
}

fn is_loopback(url: &Url) -> bool {
    let host = url.host_str().unwrap_or_default();
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

type Origin = (String, Option<String>, Option<u16>);

fn origin(url: &Url) -> Origin {
    (url.scheme().to_string(), url.host_str().map(str::to_ascii_lowercase), url.port_or_known_default())
}

impl JwksUrl {
    /// Checks the URL: https, or http to a loopback address (tests, a local sidecar).
    pub fn new(url: &str) -> Result<Self, JwksUrlError> {
        let url = Url::parse(url).map_err(|_| JwksUrlError::Invalid)?;
        match url.scheme() {
            "https" => {}
            "http" if is_loopback(&url) => {}
            _ => return Err(JwksUrlError::NotHttps(shown(&url))),
        }
        if url.host().is_none() {
            return Err(JwksUrlError::Invalid);
        }
        let home = origin(&url);
        // A redirect elsewhere would let whoever controls the first host pick the keys' host.
        let policy = reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() > MAX_REDIRECTS {
                attempt.error("too many redirects")
            } else if origin(attempt.url()) != home {
                attempt.error("redirect to another host, port or scheme refused")
            } else {
                attempt.follow()
            }
        });
        let client = reqwest::Client::builder()
            .redirect(policy)
            .timeout(FETCH_TIMEOUT)
            .connect_timeout(FETCH_TIMEOUT / 2)
            .build()
            .map_err(|e| JwksUrlError::Fetch { url: shown(&url), reason: e.without_url().to_string() })?;
        Ok(Self { url, client })
    }

    /// The URL as logs show it.
    pub fn shown(&self) -> String {
        shown(&self.url)
    }

    /// One GET of the document; a status other than 200, a body over [`MAX_JWKS_BYTES`], a
    /// redirect off the origin or a timeout is an error.
    pub async fn fetch(&self) -> Result<Vec<u8>, JwksUrlError> {
        let fail = |reason: String| JwksUrlError::Fetch { url: self.shown(), reason };
        let reason = |e: reqwest::Error| {
            // The source says why (a refused redirect, a certificate error); the URL is left out.
            let e = e.without_url();
            let mut text = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                text = format!("{text}: {s}");
                source = s.source();
            }
            text
        };
        let mut resp =
            self.client.get(self.url.clone()).header(http::header::ACCEPT, "application/json").send().await.map_err(|e| fail(reason(e)))?;
        if resp.status() != reqwest::StatusCode::OK {
            return Err(fail(format!("HTTP status {}", resp.status().as_u16())));
        }
        if resp.content_length().is_some_and(|n| n > MAX_JWKS_BYTES as u64) {
            return Err(fail(format!("the document is larger than {MAX_JWKS_BYTES} bytes")));
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| fail(reason(e)))? {
            if body.len() + chunk.len() > MAX_JWKS_BYTES {
                return Err(fail(format!("the document is larger than {MAX_JWKS_BYTES} bytes")));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_or_loopback_http_urls_are_accepted() {
        assert!(JwksUrl::new("https://idp.example.test/.well-known/jwks.json").is_ok());
        assert!(JwksUrl::new("http://127.0.0.1:8081/jwks").is_ok());
        assert!(JwksUrl::new("http://[::1]:8081/jwks").is_ok());
        assert!(JwksUrl::new("http://localhost/jwks").is_ok());
        for bad in ["http://idp.example.test/jwks", "http://10.0.0.1/jwks", "ftp://idp.example.test/jwks", "file:///etc/jwks.json"] {
            assert!(matches!(JwksUrl::new(bad), Err(JwksUrlError::NotHttps(_))), "{bad}");
        }
        assert!(matches!(JwksUrl::new("not a url"), Err(JwksUrlError::Invalid)));
    }

    #[test]
    fn the_url_is_shown_without_user_info_or_query() {
        let u = JwksUrl::new("https://user:pw@idp.example.test/jwks?token=s3cr3t#x").unwrap();
        assert_eq!(u.shown(), "https://idp.example.test/jwks");
    }
}
