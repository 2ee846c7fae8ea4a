//! What a worker reads from a Messages body before it is handed over to be priced: UTF-8, the
//! one-pass parse and the edge's checks, the API's rules, the reply script's plan and the blocks'
//! keys — everything that needs no lock.

use axum::body::Bytes;

use forkcache_engine::prompt::BlockKeys;
use forkcache_wire::check::check_request_remembering;
use forkcache_wire::{ApiError, Betas, RequestView};

use super::script::Planned;
use super::{Settings, validate};
use crate::edge::listen::Connection;

self_cell::self_cell!(
    /// A request body and what its worker read from it: the view borrows the bytes, so the two
    /// travel together from the worker to whoever prices the request.
    pub(super) struct ReadBody {
        owner: Bytes,

        #[covariant]
        dependent: Read,
    }
);

/// What a worker read from a body.
// One per request, inside the cell's one allocation: boxing the large variant would add another.
#[allow(clippy::large_enum_variant)]
pub(super) enum Read<'a> {
    /// Not UTF-8: turned away, with its error in the trace (replay must see the rejection).
    NotText(ApiError),
    /// The body as the endpoint will price it, or the API's error for it.
    Text(Result<Checked<'a>, ApiError>),
}

/// A body that parsed and passed the edge's checks.
pub(super) struct Checked<'a> {
    pub(super) view: RequestView<'a>,
    /// Unknown top-level fields (counted; refused under `strict` before this point).
    pub(super) unknown: Vec<String>,
    /// What the reply script decided for it.
    pub(super) planned: Planned,
    pub(super) keys: BlockKeys,
    /// The API's rules for the body ([`forkcache_wire::check::check_request`]'s answer), checked
    /// here rather than under the lock; none when the endpoint does not check them.
    pub(super) rules: Option<Result<(), ApiError>>,
}

impl ReadBody {
    /// Reads `body` as the API's edge does: UTF-8, the one-pass parse and check, the API's rules
    /// with `betas` (through the server's memo), the reply script's plan and the blocks' keys —
    /// everything that needs no lock. With the `connection`, the body is read from where it
    /// parts from the connection's last one (the same answer).
    pub(super) fn read(
        body: Bytes,
        betas: &Betas,
        config: &Settings,
        connection: Option<&Connection>,
    ) -> ReadBody {
        ReadBody::new(body, |body| match require_utf8(body) {
            Err(error) => Read::NotText(error),
            Ok(text) => Read::Text(checked(body, text, betas, config, connection)),
        })
    }
}

fn checked<'a>(
    body: &Bytes,
    text: &'a str,
    betas: &Betas,
    config: &Settings,
    connection: Option<&Connection>,
) -> Result<Checked<'a>, ApiError> {
    // A poisoned reader (a panic mid-read) is not used again: the body is read in one pass.
    let mut reader = connection.and_then(|connection| connection.0.reader.lock().ok());
    let (view, unknown, keys) = validate::read_checked(reader.as_deref_mut(), body, text, config.strict)?;
    let planned = config.script.plan(&view);
    let rules = config
        .rules
        .as_ref()
        .map(|memo| check_request_remembering(&view, betas, keys.check_keys(&view), memo));
    Ok(Checked { view, unknown, planned, keys, rules })
}

/// JSON is UTF-8: a body that is not is refused whole, never read with replacement characters.
/// The one UTF-8 check of a Messages body: the text it returns is parsed without another.
pub(super) fn require_utf8(body: &[u8]) -> Result<&str, ApiError> {
    std::str::from_utf8(body).map_err(|err| {
        ApiError::invalid(format!("request body is not valid UTF-8 (byte {})", err.valid_up_to() + 1))
    })
}
