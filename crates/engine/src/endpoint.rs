//! `MockEndpoint`: request bytes, API key and virtual time in; a message with computed usage, or
//! the API's error, out. Replay, the scenario engine and the HTTP server all go through here.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_128_with_seed;

use forkcache_wire::{
    ApiError, Betas, CONTEXT_1M, DiagnosticsRequest, MessageResponse, RawJson, Reply, ReplyContent,
    RequestView, ResponseBlock, StopReason, check_model_rules, parse_request,
};

use crate::billing::{
    BillingProfile, Cost, InferenceGeo, ModelPrice, Modifiers, PriceDate, PriceTable, ResolvedModel, Speed,
    TokenEquivalents, Usage,
};
use crate::cache::{
    CacheConfig, Diagnostics, Fingerprint, Fingerprints, Lookup, Miss, Outcome, PrefixCache, ScopeId,
    StoreStats,
};
use crate::clock::SimTime;
use crate::prompt::{
    BlockContext, BlockInfo, BlockKeys, BuildPassThrough, KeptBlocks, Prompt, PromptConfig, PromptRef,
    RenderCounts, RenderSketch, Renderer, ToolChanges, validate_breakpoints,
};
use crate::tokenize::{TokenizerKind, TokenizerUnavailable};

/// The fingerprint traces, stats and logs carry in place of an API key: `key-` and 16 lowercase
/// hex digits of the key's xxh3-64. It tells tenants apart without revealing a key, and is the
/// same in every run and on every machine, so traces of one key join; anyone holding a key can
/// compute it, which a [`KeySalt`] prevents.
pub fn key_fingerprint(key: &str) -> String {
    format!("key-{:016x}", xxhash_rust::xxh3::xxh3_64(key.as_bytes()))
}

/// A secret that keys the fingerprints: with it a fingerprint is `key-` and 16 hex digits of a
/// BLAKE3 keyed hash of the key, which no one without the secret can compute or link to a key
/// (an unsalted fingerprint is a public hash: whoever holds a key can find its tenant in the
/// stats). The same secret gives the same fingerprints in every run, so one user's traces still
/// join. The secret is never shown: not by `Debug`, not in a trace.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct KeySalt(Option<[u8; 32]>);

impl KeySalt {
    /// Fingerprints keyed by `secret` (any text: it is stretched into a 32-byte key).
    pub fn new(secret: &str) -> KeySalt {
        KeySalt(Some(blake3::derive_key("forkcache 2026 key fingerprint salt", secret.as_bytes())))
    }

    /// Whether fingerprints are keyed.
    pub fn is_set(&self) -> bool {
        self.0.is_some()
    }

    /// The fingerprint of `key`: [`key_fingerprint`] without a secret, keyed with one.
    pub fn fingerprint(&self, key: &str) -> String {
        match &self.0 {
            None => key_fingerprint(key),
            Some(secret) => {
                let hash = blake3::keyed_hash(secret, key.as_bytes());
                let mut first = [0; 8];
                first.copy_from_slice(&hash.as_bytes()[..8]);
                format!("key-{:016x}", u64::from_be_bytes(first))
            }
        }
    }
}

impl std::fmt::Debug for KeySalt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_set() { "KeySalt(set)" } else { "KeySalt(none)" })
    }
}

/// Everything that decides how requests are priced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EndpointConfig {
    /// Request → positions.
    pub prompt: PromptConfig,
    /// The cache.
    pub cache: CacheConfig,
    /// How writes and reads are billed. Default [`BillingProfile::Anthropic`].
    pub billing: BillingProfile,
    /// Token estimate. Default [`TokenizerKind::Bytes4`].
    pub tokenizer: TokenizerKind,
    /// Workspace of requests without an API key. Default `"default"`.
    pub default_workspace: String,
    /// API key → workspace; a key not listed is its own workspace, named by its
    /// [`key_fingerprint`] (so no key is ever shown, and no key reaches the
    /// default workspace).
    pub workspaces: BTreeMap<String, String>,
    /// Mixed into message and tool ids. Default 0.
    pub id_seed: u64,
    /// Replaces every model's minimum cacheable prefix length, in tokens (to calibrate it
    /// against recorded usage). Default none: the price table's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_cacheable_tokens: Option<u64>,
    /// The date requests are priced on. Default `None`: the price table's newest prices.
    pub price_date: Option<PriceDate>,
    /// Skip the API's own request checks ([`forkcache_wire::check`]): price whatever parses, as
    /// before those checks existed. Default false: a request the real API refuses is refused.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub lenient: bool,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        EndpointConfig {
            prompt: PromptConfig::default(),
            cache: CacheConfig::default(),
            billing: BillingProfile::Anthropic,
            tokenizer: TokenizerKind::Bytes4,
            default_workspace: "default".to_string(),
            workspaces: BTreeMap::new(),
            id_seed: 0,
            min_cacheable_tokens: None,
            price_date: None,
            lenient: false,
        }
    }
}

impl EndpointConfig {
    /// A memo for checking bodies against the API's rules ahead of the endpoint (the answer goes
    /// in [`Call::checked`]); none when the endpoint is lenient and would ignore the answer.
    pub fn rules_memo(&self) -> Option<forkcache_wire::check::CheckMemo> {
        (!self.lenient).then(forkcache_wire::check::CheckMemo::default)
    }
}

/// One request to the endpoint.
#[derive(Clone, Debug)]
pub struct Call<'a> {
    /// The body as sent.
    pub body: &'a [u8],
    /// The API key (`x-api-key` or bearer token), which picks the workspace.
    pub api_key: Option<&'a str>,
    /// The workspace, when the caller already knows it (a trace's `workspace`); it wins over
    /// `api_key`.
    pub workspace: Option<&'a str>,
    /// The betas it named (`anthropic-beta`, or a trace envelope's `betas`).
    pub betas: &'a Betas,
    /// When the request started.
    pub at: SimTime,
    /// When its response really began, if known.
    pub first_byte: Option<SimTime>,
    /// What to answer.
    pub reply: Reply,
    /// The body's rules ([`forkcache_wire::check::check_request`]) as the caller already checked
    /// them (a replay checks on its parsing workers, in parallel): their answer, used in place of
    /// checking again.
    pub checked: Option<&'a Result<(), ApiError>>,
}

impl<'a> Call<'a> {
    /// A call with the default workspace, no betas, no known first byte and the default reply.
    pub fn new(body: &'a [u8], at: SimTime) -> Call<'a> {
        Call {
            body,
            api_key: None,
            workspace: None,
            betas: Betas::NONE,
            at,
            first_byte: None,
            reply: Reply::default_text(),
            checked: None,
        }
    }
}

/// What happened to one request: the domain record behind every report row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The model id as requested.
    pub model: String,
    /// The price-table model whose prices (when `priced`) and cache constants were used.
    pub priced_as: String,
    /// False when `model` was not in the price table.
    pub model_known: bool,
    /// False when the cost is unknown (a model the table does not list, with no
    /// `price_unknown_as`): `cost` is then zero and must be shown as unknown.
    pub priced: bool,
    /// The workspace the API key maps to.
    pub workspace: String,
    /// The usage object returned.
    pub usage: Usage,
    /// Its cost.
    pub cost: Cost,
    /// Cost ÷ the model's base input price.
    pub token_equivalents: TokenEquivalents,
    /// Why it read less than it could have.
    pub miss: Option<Miss>,
    /// Start time.
    pub at: SimTime,
    /// Modelled time to first token.
    pub ttft_ms: u64,
    /// When its cache writes become readable.
    pub visible_at: SimTime,
    /// Positions in the prompt.
    pub positions: u32,
    /// Breakpoints (after automatic caching).
    pub breakpoints: u32,
    /// Breakpoints dropped as shorter than the model's minimum.
    pub breakpoints_dropped: u32,
    /// The request asked for a stream.
    pub stream: bool,
    /// The 1M-context beta was in effect: named, on a model whose price row offers it on the
    /// price date (its window, and its long-context band above 200K input).
    pub context_1m: bool,
    /// Set when the prompt's estimated size is past the model's context window but within the
    /// estimate's margin: priced, and reported as a warning (serve's log and stats, replay's
    /// `warnings`).
    pub context_warning: Option<ContextWarning>,
}

/// A prompt estimated past its model's context window by less than [`CONTEXT_MARGIN_PERCENT`]:
/// the API might refuse it, but the estimate is not Claude's tokenizer, so it is priced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ContextWarning {
    /// The prompt's input tokens, as estimated.
    pub tokens: u64,
    /// The model's context window.
    pub window: u64,
}

impl std::fmt::Display for ContextWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "prompt of {} tokens is past the {} token context window (an estimate: the API may refuse it)",
            self.tokens, self.window
        )
    }
}

/// How a body's prompt is rendered.
enum Rendering<'r> {
    /// Every block (with its keys when they were hashed beforehand).
    Whole(Option<&'r BlockKeys>),
    /// From where the body parts from the sketch's last request.
    Resumed(&'r BlockKeys, &'r mut RenderSketch),
}

/// A request rendered by its caller, for [`MockEndpoint::handle_rendered`].
#[derive(Clone, Copy, Debug)]
pub struct RenderedRequest<'a> {
    /// The model id as requested.
    pub model: &'a str,
    /// The prompt.
    pub prompt: PromptRef<'a>,
    /// The request asked for a stream.
    pub stream: bool,
    /// `max_tokens` (0 pre-warms the cache: no output).
    pub max_tokens: u64,
}

/// A priced request and its answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Exchange {
    /// What happened.
    pub record: Record,
    /// The answer.
    pub response: MessageResponse,
}

/// The mock Messages endpoint.
pub struct MockEndpoint {
    config: EndpointConfig,
    prices: PriceTable,
    renderer: Renderer,
    cache: PrefixCache,
    // How often each request identity was answered, so repeats get distinct ids.
    id_uses: HashMap<u128, u64, BuildPassThrough>,
    // Requests that asked for cache diagnostics, by response id.
    fingerprints: Fingerprints,
    // Keys the workspace fingerprints of keys without a configured workspace.
    key_salt: KeySalt,
}

/// Distinct request identities remembered for id numbering before starting over.
const ID_USES_LIMIT: usize = 1 << 20;

impl MockEndpoint {
    /// An endpoint with an empty cache.
    pub fn new(config: EndpointConfig, prices: PriceTable) -> Result<MockEndpoint, TokenizerUnavailable> {
        let renderer = Renderer::new(config.prompt.clone(), config.tokenizer.build()?);
        Ok(MockEndpoint {
            cache: PrefixCache::new(config.cache),
            config,
            prices,
            renderer,
            id_uses: HashMap::default(),
            fingerprints: Fingerprints::default(),
            key_salt: KeySalt::default(),
        })
    }

    /// Fingerprints keys with `salt` from now on (see [`KeySalt`]).
    pub fn set_key_salt(&mut self, salt: KeySalt) {
        self.key_salt = salt;
    }

    /// How keys are fingerprinted.
    pub fn key_salt(&self) -> &KeySalt {
        &self.key_salt
    }

    /// The settings.
    pub fn config(&self) -> &EndpointConfig {
        &self.config
    }

    /// The price table.
    pub fn prices(&self) -> &PriceTable {
        &self.prices
    }

    /// Prices the following requests on `date` (`None`: the table's newest prices).
    pub fn set_price_date(&mut self, date: Option<PriceDate>) {
        self.config.price_date = date;
    }

    /// Cache entry counters.
    pub fn cache_stats(&self) -> StoreStats {
        self.cache.stats()
    }

    /// Hands over the facts of every block seen so far ([`Renderer::keep_blocks`]).
    pub fn keep_blocks(&mut self) -> KeptBlocks {
        self.renderer.keep_blocks()
    }

    /// Takes over block facts another endpoint gathered under the same prompt settings
    /// ([`Renderer::adopt_blocks`]).
    pub fn adopt_blocks(&mut self, kept: KeptBlocks) {
        self.renderer.adopt_blocks(kept);
    }

    /// How the prompts rendered so far were built: whole, or resumed from a kept request. Every
    /// render counts: priced requests, `count_tokens`, and requests the render refused.
    pub fn render_counts(&self) -> RenderCounts {
        self.renderer.counts()
    }

    /// Drops the cache state of every workspace idle at `now` (its last entry expired, and 5
    /// minutes passed since its last request) except `keep`'s, and returns their names; see
    /// [`PrefixCache::drop_idle`]. Usage is unchanged by it as long as no request starting
    /// before `now` is priced afterwards: a caller that prices requests in arrival order (the
    /// server) calls it at each arrival, so memory follows the workspaces in use, not every
    /// workspace ever seen.
    pub fn drop_idle_workspaces(&mut self, now: SimTime, keep: Option<&str>) -> Vec<String> {
        self.cache.drop_idle(now, keep)
    }

    /// Whether `workspace` has cache state (seen, and not dropped since).
    pub fn holds_workspace(&self, workspace: &str) -> bool {
        self.cache.holds_workspace(workspace)
    }

    /// Workspaces with cache state.
    pub fn workspaces_held(&self) -> usize {
        self.cache.workspaces()
    }

    /// The workspace an API key belongs to: its configured workspace, else its fingerprint.
    pub fn workspace_of(&self, api_key: Option<&str>) -> String {
        match api_key {
            None => self.config.default_workspace.clone(),
            Some(key) => {
                self.config.workspaces.get(key).cloned().unwrap_or_else(|| self.key_salt.fingerprint(key))
            }
        }
    }

    /// The workspace a call is priced in.
    fn workspace_of_call(&self, call: &Call) -> String {
        match call.workspace {
            Some(workspace) => workspace.to_string(),
            None => self.workspace_of(call.api_key),
        }
    }

    /// Prices and answers one request.
    pub fn handle(&mut self, call: Call) -> Result<Exchange, ApiError> {
        let view = parse_request(call.body)?;
        self.handle_view(&view, &call)
    }

    /// [`MockEndpoint::handle`] for a body already parsed (its `body` field is not read again).
    pub fn handle_view(&mut self, view: &RequestView, call: &Call) -> Result<Exchange, ApiError> {
        self.handle_keyed(view, None, call)
    }

    /// [`MockEndpoint::handle_view`] with the body's [`BlockKeys`] computed beforehand (on a
    /// server's worker, on a replay's parsing threads): the same answer.
    pub fn handle_keyed(
        &mut self,
        view: &RequestView,
        keys: Option<&BlockKeys>,
        call: &Call,
    ) -> Result<Exchange, ApiError> {
        self.handle_rendering(view, Rendering::Whole(keys), call)
    }

    /// [`MockEndpoint::handle_keyed`] for a client whose last requests `sketch` keeps (a `serve`
    /// connection's, a replay's): the prompt is rendered from where the request parts from one of
    /// them ([`Renderer::render_resumed`], which says what the sketch keeps). The same answer.
    pub fn handle_resumed(
        &mut self,
        view: &RequestView,
        keys: &BlockKeys,
        sketch: &mut RenderSketch,
        call: &Call,
    ) -> Result<Exchange, ApiError> {
        self.handle_rendering(view, Rendering::Resumed(keys, sketch), call)
    }

    fn handle_rendering(
        &mut self,
        view: &RequestView,
        rendering: Rendering,
        call: &Call,
    ) -> Result<Exchange, ApiError> {
        let max_tokens = required_max_tokens(view)?;
        if max_tokens == 0 {
            check_prewarm(view)?;
        }
        check_model_rules(view, view.require_model()?)?;
        if !self.config.lenient {
            match call.checked {
                Some(checked) => checked.clone()?,
                None => forkcache_wire::check::check_request(view, call.betas)?,
            }
        }
        let settings = self.price_settings(view)?;
        let prompt = self.render_view(view, rendering, call.betas)?;
        let request = rendered(view, &prompt, max_tokens)?;
        let context_warning = self.check_context(&request, call.betas)?;
        let mut exchange = self.serve(&request, call, settings);
        exchange.record.context_warning = context_warning;
        if let Some(asked) = &view.diagnostics {
            exchange.response.diagnostics = Some(self.diagnose(&request, asked, call.betas, &exchange));
        }
        Ok(exchange)
    }

    /// The API's refusal of a prompt past the model's context window. Declared sizes
    /// (`forkcache_tokens`) are exact, so a prompt of declared blocks is refused one token past
    /// the window, as the API refuses it. Estimated sizes are not Claude's tokenizer and may be
    /// [`CONTEXT_MARGIN_PERCENT`] too high: a prompt is refused only when it is past the window
    /// even with every estimate taken that much lower; one past the window but not by that much
    /// is priced with a [`ContextWarning`]. The window is the table's, or the 1M-context beta's
    /// where the request names it and the model offers it on the price date.
    fn check_context(
        &self,
        request: &RenderedRequest,
        betas: &Betas,
    ) -> Result<Option<ContextWarning>, ApiError> {
        let resolved = self.prices.resolve(request.model);
        let named = betas.has(CONTEXT_1M);
        let window = resolved.price.context_window_with(named, self.config.price_date);
        let Some(window) = window.filter(|_| resolved.known) else { return Ok(None) };
        let tokens = request.prompt.total_tokens();
        let estimated = request.prompt.estimated_tokens().min(tokens);
        let declared = tokens - estimated;
        // declared + estimated × 100 / (100 + margin) > window, in integers.
        let margin = u128::from(100 + CONTEXT_MARGIN_PERCENT);
        let fewest_scaled = u128::from(declared) * margin + u128::from(estimated) * 100;
        if fewest_scaled > u128::from(window) * margin {
            return Err(ApiError::invalid(format!("{PROMPT_TOO_LONG}: {tokens} tokens > {window} maximum")));
        }
        Ok((tokens > window).then_some(ContextWarning { tokens, window }))
    }

    /// The request's `speed` and `inference_geo`, refused as the API would where the model has
    /// no such price.
    fn price_settings(&self, view: &RequestView) -> Result<PriceSettings, ApiError> {
        let speed = match view.speed.as_deref() {
            None => None,
            Some("standard") => Some(Speed::Standard),
            Some("fast") => Some(Speed::Fast),
            Some(other) => {
                return Err(ApiError::invalid(format!(
                    "speed: Input should be 'standard' or 'fast' (got {other:?})"
                )));
            }
        };
        let geo = match view.inference_geo.as_deref() {
            None => None,
            Some("us") => Some(InferenceGeo::Us),
            Some(_) => Some(InferenceGeo::Global),
        };
        let resolved = self.prices.resolve(view.require_model()?);
        if speed == Some(Speed::Fast) && resolved.priced && resolved.price.fast.is_none() {
            let model = view.require_model()?;
            return Err(ApiError::invalid(format!("speed: fast mode is not available for model {model}")));
        }
        Ok(PriceSettings { speed, geo, context_1m: false })
    }

    /// Cache diagnostics for a request that asked: compared with the request behind
    /// `previous_message_id`, then remembered under this response's id for the next turn.
    fn diagnose(
        &mut self,
        request: &RenderedRequest,
        asked: &DiagnosticsRequest,
        betas: &Betas,
        exchange: &Exchange,
    ) -> Option<Diagnostics> {
        let workspace = &exchange.record.workspace;
        let previous = asked.previous_message_id.as_deref();
        let diagnostics =
            self.fingerprints.diagnose(workspace, previous, request.model, request.prompt, betas);
        self.fingerprints.keep(
            workspace,
            &exchange.response.id,
            Fingerprint::of(request.model, request.prompt, betas),
        );
        diagnostics
    }

    /// Prices a request its caller rendered itself (with [`crate::prompt::PromptBuilder`] and
    /// [`MockEndpoint::block_info`]), typically sharing a conversation's positions with the
    /// request before it. Gives exactly the usage the same request's bytes would; the caller is
    /// responsible for the checks of a body that only the bytes show (`max_tokens: 0` with
    /// incompatible settings). Breakpoint count and TTL order are checked here.
    pub fn handle_rendered(&mut self, request: &RenderedRequest, call: &Call) -> Result<Exchange, ApiError> {
        let prompt = request.prompt;
        let marked = prompt.breakpoints.iter().map(|bp| (prompt.position(bp.position).slot, bp.ttl));
        validate_breakpoints(marked)?;
        let context_warning = self.check_context(request, call.betas)?;
        let mut exchange = self.serve(request, call, PriceSettings::default());
        exchange.record.context_warning = context_warning;
        Ok(exchange)
    }

    /// The facts of one raw block (memoized), to render requests with
    /// [`crate::prompt::PromptBuilder`]. `path` names the block in an error.
    pub fn block_info(
        &mut self,
        raw: RawJson,
        context: BlockContext,
        path: &str,
    ) -> Result<BlockInfo, ApiError> {
        self.renderer.block_info(raw, context, path)
    }

    /// What `request` costs sent alone, with nothing cached and nothing shared (the naive
    /// baseline a saving is measured against). Touches no state.
    pub fn price_alone(&self, request: &RenderedRequest, call: &Call) -> Record {
        self.price_alone_with(request, call, PriceSettings::default())
    }

    fn price_alone_with(&self, request: &RenderedRequest, call: &Call, settings: PriceSettings) -> Record {
        let resolved = self.prices.resolve(request.model);
        let (_, output_tokens) = self.reply_of(request, call);
        // No scope: an empty cache is never looked into.
        let lookup = lookup(ScopeId::UNSCOPED, request, resolved.price, call, output_tokens);
        let outcome = self.cache.price_alone(lookup);
        let workspace = self.workspace_of_call(call);
        let settings = PriceSettings { context_1m: self.context_1m(resolved, call.betas), ..settings };
        Pricing { config: &self.config, resolved, settings, workspace, outcome, output_tokens }
            .record(request, call)
            .0
    }

    /// [`MockEndpoint::price_alone`] for a parsed body.
    pub fn price_view_alone(&mut self, view: &RequestView, call: &Call) -> Result<Record, ApiError> {
        let max_tokens = required_max_tokens(view)?;
        let settings = self.price_settings(view)?;
        let prompt = self.render_view(view, Rendering::Whole(None), call.betas)?;
        Ok(self.price_alone_with(&rendered(view, &prompt, max_tokens)?, call, settings))
    }

    /// The view's prompt, rendered for the model it names (or the default model's constants),
    /// under the betas the request named.
    fn render_view(
        &mut self,
        view: &RequestView,
        rendering: Rendering,
        betas: &Betas,
    ) -> Result<Prompt, ApiError> {
        let model = view.require_model()?;
        let tool_changes = match betas.tool_changes_keep_cache(model) {
            true => ToolChanges::KeepCache,
            false => ToolChanges::Invalidate,
        };
        let price = &self.prices.resolve(model).price;
        match rendering {
            Rendering::Whole(keys) => self.renderer.render_keyed(view, keys, price, tool_changes),
            Rendering::Resumed(keys, sketch) => {
                self.renderer.render_resumed(view, keys, sketch, price, tool_changes)
            }
        }
    }

    fn reply_of(&self, request: &RenderedRequest, call: &Call) -> (Reply, u64) {
        let reply = if request.max_tokens == 0 {
            Reply { content: Vec::new(), stop_reason: Some(StopReason::MaxTokens), output_tokens: Some(0) }
        } else {
            call.reply.clone()
        };
        let output_tokens = reply.output_tokens.unwrap_or_else(|| self.count_output(&reply));
        (reply, output_tokens)
    }

    fn serve(&mut self, request: &RenderedRequest, call: &Call, settings: PriceSettings) -> Exchange {
        let (reply, output_tokens) = self.reply_of(request, call);
        let workspace = self.workspace_of_call(call);
        let resolved = self.prices.resolve(request.model);
        // The cache is per model: a known id (or alias) shares its model's cache; an unknown id
        // is its own model, whatever prices it.
        let scope_model = if resolved.known { resolved.price.id() } else { request.model };
        let scope = self.cache.scope(&workspace, scope_model);
        let mut lookup = lookup(scope, request, resolved.price, call, output_tokens);
        if let Some(min_tokens) = self.config.min_cacheable_tokens {
            lookup.min_tokens = min_tokens;
        }
        let outcome = self.cache.serve(lookup);
        let settings = PriceSettings { context_1m: self.context_1m(resolved, call.betas), ..settings };
        let parts = Pricing { config: &self.config, resolved, settings, workspace, outcome, output_tokens };
        let (record, usage) = parts.record(request, call);
        let response = self.respond(request.model, request.prompt, reply, usage);
        Exchange { record, response }
    }

    /// Whether the 1M-context beta is in effect: named, on a listed model whose row offers it on
    /// the price date.
    fn context_1m(&self, resolved: ResolvedModel, betas: &Betas) -> bool {
        let offered = resolved.price.context_1m_window(self.config.price_date).is_some();
        betas.has(CONTEXT_1M) && resolved.known && offered
    }

    /// `count_tokens`: the request's total input tokens. Never touches the cache.
    pub fn count_tokens(&mut self, body: &[u8]) -> Result<u64, ApiError> {
        let view = parse_request(body)?;
        self.count_tokens_keyed(&view, None)
    }

    /// [`MockEndpoint::count_tokens`] for a body parsed (and its blocks hashed) beforehand.
    pub fn count_tokens_keyed(
        &mut self,
        view: &RequestView,
        keys: Option<&BlockKeys>,
    ) -> Result<u64, ApiError> {
        if !self.config.lenient {
            self.check_count_tokens(view)?;
        }
        Ok(self.render_view(view, Rendering::Whole(keys), Betas::NONE)?.total_tokens())
    }

    /// `count_tokens`' own refusals: a model the price table does not list is the API's 404
    /// (an unpriced model can still be simulated through `/v1/messages`, never counted), then
    /// the body's rules.
    fn check_count_tokens(&self, view: &RequestView) -> Result<(), ApiError> {
        let model = view.require_model()?;
        if !self.prices.resolve(model).known {
            return Err(forkcache_wire::check::unknown_model(model));
        }
        forkcache_wire::check::check_count_tokens(view)
    }

    fn count_output(&self, reply: &Reply) -> u64 {
        let tokenizer = self.renderer.tokenizer();
        reply
            .content
            .iter()
            .map(|block| {
                let json = match block {
                    ReplyContent::Text(text) => serde_json::json!({"type": "text", "text": text}),
                    ReplyContent::ToolUse { name, input } => {
                        serde_json::json!({"type": "tool_use", "name": name, "input": input})
                    }
                };
                tokenizer.count(json.to_string().as_bytes())
            })
            .sum()
    }

    fn respond(&mut self, model: &str, prompt: PromptRef, reply: Reply, usage: Usage) -> MessageResponse {
        let identity = request_identity(model, prompt);
        let uses = self.id_uses.entry(identity).or_insert(0);
        *uses += 1;
        let message_hash = id_hash(self.config.id_seed, identity, *uses);
        if self.id_uses.len() >= ID_USES_LIMIT {
            self.id_uses.clear();
        }
        let stop_reason = reply.resolved_stop_reason();
        let content = reply
            .content
            .into_iter()
            .enumerate()
            .map(|(index, block)| match block {
                ReplyContent::Text(text) => ResponseBlock::Text { text },
                ReplyContent::ToolUse { name, input } => ResponseBlock::ToolUse {
                    id: format!(
                        "toolu_fc{}",
                        base62(id_hash(self.config.id_seed, message_hash, index as u64 + 1))
                    ),
                    name,
                    input,
                },
            })
            .collect();
        MessageResponse {
            id: format!("msg_fc{}", base62(message_hash)),
            kind: "message",
            role: "assistant",
            content,
            model: model.to_string(),
            stop_reason,
            stop_sequence: None,
            usage,
            diagnostics: None,
        }
    }
}

/// The request settings that change its price, as the request named them.
#[derive(Clone, Copy, Debug, Default)]
struct PriceSettings {
    speed: Option<Speed>,
    geo: Option<InferenceGeo>,
    // The 1M-context beta is in effect (from the call's betas, not the body).
    context_1m: bool,
}

impl PriceSettings {
    fn modifiers(self) -> Modifiers {
        Modifiers {
            speed: self.speed.unwrap_or_default(),
            geo: self.geo.unwrap_or_default(),
            batch: false,
            context_1m: self.context_1m,
        }
    }
}

fn lookup<'r>(
    scope: ScopeId,
    request: &RenderedRequest<'r>,
    price: &ModelPrice,
    call: &Call,
    output_tokens: u64,
) -> Lookup<'r> {
    Lookup {
        scope,
        model: request.model,
        prompt: request.prompt,
        min_tokens: price.min_cacheable_tokens,
        start: call.at,
        output_tokens,
        first_byte: call.first_byte,
    }
}

/// Everything that prices one looked-up request.
struct Pricing<'t> {
    config: &'t EndpointConfig,
    resolved: ResolvedModel<'t>,
    settings: PriceSettings,
    workspace: String,
    outcome: Outcome,
    output_tokens: u64,
}

impl Pricing<'_> {
    /// The record and the usage object the response carries. An unpriced model costs zero here
    /// and is marked so.
    fn record(self, request: &RenderedRequest, call: &Call) -> (Record, Usage) {
        let outcome = &self.outcome;
        let mut usage = Usage::new(
            outcome.uncached,
            outcome.read,
            outcome.write_5m,
            outcome.write_1h,
            self.output_tokens,
        );
        usage.speed = self.settings.speed;
        usage.inference_geo = self.settings.geo;
        let price = self.resolved.price;
        let billing = self.config.billing;
        let cost = match self.resolved.priced {
            true => price.cost(billing, self.config.price_date, &usage, self.settings.modifiers()),
            false => None,
        };
        let input_rate = price.rates_on(self.config.price_date).input;
        let record = record(RecordParts {
            model: request.model.to_string(),
            priced_as: price.id().to_string(),
            model_known: self.resolved.known,
            priced: cost.is_some(),
            workspace: self.workspace,
            usage,
            cost: cost.unwrap_or_default(),
            token_equivalents: cost.unwrap_or_default().token_equivalents(input_rate),
            call,
            prompt: request.prompt,
            outcome: self.outcome,
            stream: request.stream,
            context_1m: self.settings.context_1m,
        });
        (record, usage)
    }
}

/// How far past a model's context window an estimated prompt may go before it is refused, in
/// percent: the estimate is not Claude's tokenizer (later models count up to 30% more or less).
pub const CONTEXT_MARGIN_PERCENT: u64 = 30;

/// How the refusal of a prompt past the context window begins (the API's own words).
pub const PROMPT_TOO_LONG: &str = "prompt is too long";

/// The request a parsed body describes, over its rendered prompt.
fn rendered<'p>(
    view: &'p RequestView,
    prompt: &'p Prompt,
    max_tokens: u64,
) -> Result<RenderedRequest<'p>, ApiError> {
    Ok(RenderedRequest {
        model: view.require_model()?,
        prompt: prompt.as_ref(),
        stream: view.stream,
        max_tokens,
    })
}

/// `max_tokens`, or the API's error when the field is missing.
pub fn required_max_tokens(view: &RequestView) -> Result<u64, ApiError> {
    view.max_tokens.ok_or_else(|| ApiError::invalid("max_tokens: Field required"))
}

/// `max_tokens: 0` pre-warms the cache; the API refuses it together with generation settings.
fn check_prewarm(view: &RequestView) -> Result<(), ApiError> {
    let conflict = if view.stream {
        Some("stream: true")
    } else if view.thinking.as_ref().is_some_and(|t| t.kind == "enabled") {
        Some("thinking.type: \"enabled\"")
    } else if view.wants_format() {
        Some("output_config.format")
    } else if view.tool_choice.as_ref().is_some_and(|c| c.kind == "any" || c.kind == "tool") {
        Some("tool_choice of type \"any\" or \"tool\"")
    } else {
        None
    };
    match conflict {
        Some(what) => Err(ApiError::invalid(format!(
            "max_tokens: 0 (cache pre-warming) cannot be combined with {what}"
        ))),
        None => Ok(()),
    }
}

struct RecordParts<'a> {
    model: String,
    priced_as: String,
    model_known: bool,
    priced: bool,
    workspace: String,
    usage: Usage,
    cost: Cost,
    token_equivalents: TokenEquivalents,
    call: &'a Call<'a>,
    prompt: PromptRef<'a>,
    outcome: Outcome,
    stream: bool,
    context_1m: bool,
}

fn record(parts: RecordParts) -> Record {
    Record {
        model: parts.model,
        priced_as: parts.priced_as,
        model_known: parts.model_known,
        priced: parts.priced,
        workspace: parts.workspace,
        usage: parts.usage,
        cost: parts.cost,
        token_equivalents: parts.token_equivalents,
        miss: parts.outcome.miss,
        at: parts.call.at,
        ttft_ms: parts.outcome.ttft_ms,
        visible_at: parts.outcome.visible_at,
        positions: parts.prompt.len() as u32,
        breakpoints: parts.prompt.breakpoints.len() as u32,
        breakpoints_dropped: parts.outcome.breakpoints_dropped,
        stream: parts.stream,
        context_1m: parts.context_1m,
        context_warning: None,
    }
}

/// What makes two requests "the same request" for id numbering: model and whole prefix.
fn request_identity(model: &str, prompt: PromptRef) -> u128 {
    let last = prompt.last().map_or(0, |p| p.hash);
    xxh3_128_with_seed(model.as_bytes(), last as u64 ^ (last >> 64) as u64)
}

fn id_hash(seed: u64, identity: u128, counter: u64) -> u128 {
    let mut bytes = [0u8; 24];
    bytes[..16].copy_from_slice(&identity.to_le_bytes());
    bytes[16..].copy_from_slice(&counter.to_le_bytes());
    xxh3_128_with_seed(&bytes, seed)
}

fn base62(mut value: u128) -> String {
    const DIGITS: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut out = [b'0'; 22];
    for slot in out.iter_mut().rev() {
        *slot = DIGITS[(value % 62) as usize];
        value /= 62;
    }
    out.iter().map(|&digit| char::from(digit)).collect()
}

#[cfg(test)]
mod key_salt_tests {
    use super::*;

    #[test]
    fn a_salt_keys_fingerprints_and_stays_hidden() {
        let unsalted = KeySalt::default();
        assert_eq!(unsalted.fingerprint("sk-ant-a"), key_fingerprint("sk-ant-a"));
        let salt = KeySalt::new("team secret");
        let print = salt.fingerprint("sk-ant-a");
        assert_eq!(print.len(), 20);
        assert!(print.starts_with("key-") && print[4..].chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')));
        assert_ne!(print, key_fingerprint("sk-ant-a"), "a salted fingerprint is not the public one");
        assert_eq!(KeySalt::new("team secret").fingerprint("sk-ant-a"), print, "the same in every run");
        assert_ne!(KeySalt::new("other secret").fingerprint("sk-ant-a"), print);
        assert_ne!(salt.fingerprint("sk-ant-b"), print);
        assert_eq!(format!("{salt:?}"), "KeySalt(set)");
    }

    #[test]
    fn the_endpoint_names_a_key_s_workspace_with_its_salt() {
        let mut endpoint = MockEndpoint::new(EndpointConfig::default(), PriceTable::builtin()).unwrap();
        assert_eq!(endpoint.workspace_of(Some("k")), key_fingerprint("k"));
        endpoint.set_key_salt(KeySalt::new("s"));
        assert_eq!(endpoint.workspace_of(Some("k")), KeySalt::new("s").fingerprint("k"));
    }
}
