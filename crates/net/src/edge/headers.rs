//! The request headers both edges read.

use axum::http::{HeaderMap, HeaderValue, header};

use forkcache_wire::Betas;

/// The betas of every `anthropic-beta` header (a value that is not text names none).
pub(crate) fn request_betas(headers: &HeaderMap) -> Betas {
    Betas::from_header_values(
        headers.get_all("anthropic-beta").iter().filter_map(|value| value.to_str().ok()),
    )
}

/// `x-api-key`, else the token of `Authorization: Bearer …`; empty values count as absent.
pub(crate) fn api_key(headers: &HeaderMap) -> Option<String> {
    let text = |value: &HeaderValue| String::from_utf8_lossy(value.as_bytes()).trim().to_string();
    let from_header = headers.get("x-api-key").map(text);
    let from_bearer = || {
        let value = text(headers.get(header::AUTHORIZATION)?);
        let (scheme, token) = value.split_once(' ')?;
        scheme.eq_ignore_ascii_case("bearer").then(|| token.trim().to_string())
    };
    from_header.filter(|key| !key.is_empty()).or_else(from_bearer).filter(|key| !key.is_empty())
}

/// The 401 for a key header whose bytes are not UTF-8, when it has one. Such a key is refused
/// rather than read lossily: two keys differing only in invalid bytes would otherwise share a
/// workspace (its cache and its stats).
pub(crate) fn key_not_utf8(headers: &HeaderMap) -> Option<forkcache_wire::ApiError> {
    let bearer = headers.get(header::AUTHORIZATION);
    let malformed = headers
        .get("x-api-key")
        .into_iter()
        .chain(bearer)
        .any(|value| std::str::from_utf8(value.as_bytes()).is_err());
    malformed.then(|| {
        forkcache_wire::ApiError::new(
            forkcache_wire::ErrorKind::Authentication,
            "invalid x-api-key: the key is not UTF-8",
        )
    })
}
