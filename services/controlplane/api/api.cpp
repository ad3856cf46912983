#include "services/controlplane/api/api.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "services/controlplane/acl/acl.hpp"
#include "services/controlplane/acl/secret.hpp"
#include "services/controlplane/api/audit_writes.hpp"
#include "services/controlplane/api/endpoints.hpp"
#include "services/controlplane/api/event_stream.hpp"
#include "services/controlplane/api/openapi_document.hpp"
#include "services/controlplane/api/request_params.hpp"
#include "services/controlplane/api/routes.hpp"
#include "services/controlplane/secrets/sealed_backend.hpp"
#include "services/controlplane/http/query.hpp"
#include "services/controlplane/http/router.hpp"
#include "services/controlplane/namespaces/namespace_rules.hpp"
#include "services/controlplane/state/state_store.hpp"
#include "shared/metrics/families.hpp"

namespace mooring::controlplane::api {

namespace {

struct Blocking {
  Table table;
  std::uint64_t index = 0;
  std::chrono::milliseconds wait{0};
};

// A write's Idempotency-Key and what identifies its request.
struct KeyedWrite {
  std::string key;
  std::string fingerprint;
};

// ?index=N (present): a non-negative integer, or why not.
domain::Expected<std::uint64_t> index_param(const http::Request& req) {
  const auto idx = req.param("index").value_or("");
  try {
    std::size_t used = 0;
    // stoull reads "-1" as 2^64-1: only digits are an index.
    if (idx.empty() || !std::isdigit(static_cast<unsigned char>(idx.front()))) throw std::invalid_argument("sign");
    const auto n = std::stoull(std::string(idx), &used);
    if (used != idx.size()) throw std::invalid_argument("trailing");
    return n;
  } catch (const std::exception&) {
    return domain::error("query parameter \"index\": must be a non-negative integer, got \"" + std::string(idx) + "\"");
  }
}

// What an event's topic needs to be seen in an event list.
acl::Need event_need(const std::string& topic) {
  using acl::Need;
  if (topic == "Volume" || topic == "Claim") return Need::cap(acl::Capability::csi_read_volume);
  if (topic == "Allocation") return Need::cap(acl::Capability::read_alloc);
  if (topic == "Node") return Need::on(acl::Area::node, acl::Level::read);
  if (topic == "Plugin") return Need::on(acl::Area::plugin, acl::Level::read);
  if (topic == "Namespace") return Need::on(acl::Area::operator_, acl::Level::read);
  return Need::management();
}

}  // namespace

struct Api::Impl {
  Impl(StateStore& s, volumes::VolumeLifecycle& v, ApiOptions o)
      : ctx{s, v, o.keyring, o.acl, o.enrollment_ca, o.last_heard, o.node_cert_ttl}, options(std::move(o)) {
    for (const auto& e : route_entries()) router.add(e.method, e.pattern, e.route);
    if (auto* f = metrics::families()) http_seconds = f->http_requests_seconds;
  }

  // ---- ACLs: 401 without a usable token, 403 naming what is missing; nothing runs on refusal ----
  std::optional<http::Response> authorize(const http::Request& req, const Route& route, std::optional<Caller>& caller) {
    caller.reset();
    if (!options.acl) return std::nullopt;
    auto c = request_caller(ctx, req);
    if (route.need.kind == acl::Need::Kind::anyone) {
      // Nothing is required (the endpoint checks its own credential), but a token that is there
      // names who asked in the audit log: a management token's forced re-key of a node.
      if (c && !c->accessor.empty()) caller = std::move(*c);
      return std::nullopt;
    }
    if (!c) return http::error_response(401, c.error());
    if (c->accessor.empty()) {  // no token: the anonymous policy, if there is one
      if (!ctx.store.acl_policy("anonymous") || route.need.kind == acl::Need::Kind::any_token ||
          missing(*c, route, req))
        return http::error_response(401, "ACL token required: send it as X-Mooring-Token (or Authorization: Bearer)");
    } else if (auto lacks = missing(*c, route, req)) {
      const auto& ns = request_namespace(req);
      std::string where =
          route.need.kind == acl::Need::Kind::capability && lacks->find(':') == std::string::npos
              ? (ns == kAnyNamespace ? std::string(" in any namespace") : " in namespace \"" + ns + "\"")
              : "";
      caller = std::move(*c);  // refused, but known: the audit log names the token
      return http::error_response(
          403, "permission denied: token " + nlohmann::json(caller->name).dump() + " lacks " + *lacks + where);
    }
    caller = std::move(*c);
    return std::nullopt;
  }

  std::optional<std::string> missing(const Caller& c, const Route& route, const http::Request& req) const {
    const auto& ns = request_namespace(req);
    if (auto lacks = c.acl.missing(route.need, ns)) return lacks;
    if (!route.extra) return std::nullopt;
    for (const auto& extra : route.extra(ctx.store, req))
      if (auto lacks = c.acl.missing(extra.need, ns))
        return extra.why.empty() ? *lacks : *lacks + " (" + std::string(extra.why) + ")";
    return std::nullopt;
  }

  // A filtered list (events) and a list of every namespace ("*") keep only the items the caller
  // may read, each in its own namespace (events about nodes and plugins have none).
  static http::Response filter(const std::optional<Caller>& caller, const Route& route, const http::Request& req,
                               http::Response res) {
    const bool namespaces = route.watch == Table::namespaces;  // the items are namespaces
    const bool events = route.need.kind == acl::Need::Kind::filtered && !namespaces;
    if (!caller || res.status != 200 || caller->acl.is_management()) return res;
    if (!events && !namespaces && !(route.any_namespace && request_namespace(req) == kAnyNamespace)) return res;
    auto items = nlohmann::json::parse(res.body, nullptr, false);
    if (!items.is_array()) return res;
    nlohmann::json kept = nlohmann::json::array();
    for (auto& item : items) {
      if (namespaces) {
        if (may_read_namespace(caller->acl, item.value("Name", std::string()))) kept.push_back(std::move(item));
        continue;
      }
      const auto need = events ? event_need(item.value("Topic", std::string())) : route.need;
      if (!caller->acl.missing(need, item.value("Namespace", std::string()))) kept.push_back(std::move(item));
    }
    res.body = json_ok(kept).body;
    return res;
  }

  // Everything up to the endpoint call. Returns a response when the request ends here (errors,
  // preflight); otherwise fills `route` and `blocking`.
  std::optional<http::Response> prepare(http::Request& req, const Route*& route, std::optional<Blocking>& blocking,
                                        std::optional<Caller>& caller) {
    auto [path, query] = http::split_target(req.target);
    req.path = std::string(path);
    auto params = http::parse_query(query);
    if (!params) return bad_request("malformed query string");
    req.query = std::move(*params);
    if (auto bad = invalid_query_text(req.query)) return bad_request(*bad);

    auto m = router.match(req.method, req.path);
    if (m.bad_encoding) return bad_request("malformed percent-encoding in path");
    if (auto bad = invalid_path_text(m.params)) return bad_request(*bad);
    if (req.method == "OPTIONS") {
      if (!m.path_known) return http::error_response(404, "no such endpoint: " + req.path);
      return http::cors_preflight(options.cors, req, m.allow);
    }
    if (!m.target) {
      if (m.path_known) {
        auto r = http::error_response(405, "method " + req.method + " not allowed on " + req.path);
        r.set_header("Allow", m.allow);
        return r;
      }
      return http::error_response(404, "no such endpoint: " + req.path);
    }
    if (http::cors_write_forbidden(options.cors, req))
      return http::error_response(403, "writes from origin " + std::string(req.header("origin")) +
                                           " are not allowed (see --cors-write-origin)");
    req.params = std::move(m.params);
    route = m.target;
    // Resolved once, here: the ACL check and the endpoint read the same namespace from the query.
    if (namespaced(*route)) {
      auto ns = resolve_namespace(req, route->any_namespace);
      if (!ns) return bad_request(ns.error());
      req.query.insert_or_assign("namespace", std::move(*ns));
    }
    if (!ctx.store.ready() && route->endpoint != at_once<health> && route->endpoint != at_once<ready> &&
        route->endpoint != at_once<serve_ui> && route->endpoint != at_once<serve_openapi>)
      return http::error_response(503, "state is not loaded yet");
    if (auto refusal = authorize(req, *route, caller)) return refusal;
    // A write names a namespace that exists: a typo never makes a new one. (DELETE may act in one
    // that is gone: it finds nothing, or a snapshot record left behind.)
    if ((req.method == "PUT" || req.method == "POST") && namespaced(*route))
      if (auto no = namespaces::unknown(ctx.store, request_namespace(req))) return bad_request(*no);

    if (route->watch) {
      Blocking b{*route->watch};
      if (req.param("index")) {
        auto n = index_param(req);
        if (!n) return bad_request(n.error());
        b.index = *n;
        b.wait = options.default_wait;
        if (auto w = req.param("wait")) {
          auto d = http::parse_duration(*w);
          if (!d)
            return bad_request("query parameter \"wait\": not a duration like \"10s\" or \"1m\": \"" + std::string(*w) +
                               "\"");
          b.wait = std::min(*d, options.max_wait);
        }
        blocking = b;
      }
    }
    return std::nullopt;
  }

  // GET /v1/event/stream. The caller is checked again before every piece, so a deleted token or
  // a policy change takes effect on a stream already open (its events are filtered by the ACL
  // the token has now).
  http::Response open_stream(const http::Request& req, const Route& route, std::optional<Caller> caller) {
    auto topics = TopicFilter::parse(http::query_values(req.target, "topic"));
    if (!topics) return bad_request(topics.error());
    std::uint64_t start = ctx.store.durable_index() + 1;  // without ?index=: new events only
    if (req.param("index")) {
      auto n = index_param(req);
      if (!n) return bad_request(n.error());
      start = *n;
    }
    auto who = std::make_shared<std::optional<Caller>>(std::move(caller));
    auto visible = [who](const domain::Event& e) {
      return !*who || (*who)->acl.is_management() || !(*who)->acl.missing(event_need(e.topic), e.ns);
    };
    auto recheck = [this, who, request = std::make_shared<http::Request>(req), &route]() -> std::optional<std::string> {
      auto refusal = authorize(*request, route, *who);
      if (!refusal) return std::nullopt;
      auto body = nlohmann::json::parse(refusal->body, nullptr, false);
      return body.is_object() ? body.value("Error", std::string("refused")) : std::string("refused");
    };
    EventCursor cursor(start, std::move(*topics), request_namespace(req), std::move(visible));
    return open_event_stream(ctx.store, std::move(cursor), {.heartbeat = options.event_heartbeat}, std::move(recheck));
  }

  // A GET of a watched table is a pure function of its target and the store's index, so while no
  // write happened, the same target is answered from here: dashboards polling a list of a
  // thousand volumes cost a lookup and a copy, not a rebuild of the JSON. Any write moves the
  // index and so invalidates every entry; the map is bounded by clearing it.
  struct CachedRead {
    std::uint64_t index = 0;
    http::Response response;
  };
  static constexpr std::size_t kReadCacheEntries = 128;
  std::map<std::string, CachedRead, std::less<>> read_cache;

  boost::asio::awaitable<http::Response> call(const Route& route, const http::Request& req) {
    if (req.method != "GET" || !route.watch) co_return co_await route.endpoint(ctx, req);
    const auto index = ctx.store.index();
    if (auto it = read_cache.find(req.target); it != read_cache.end() && it->second.index == index)
      co_return it->second.response;
    auto res = co_await route.endpoint(ctx, req);
    if (res.status == 200) {
      if (read_cache.size() >= kReadCacheEntries) read_cache.clear();
      read_cache.insert_or_assign(req.target, CachedRead{index, res});
    }
    co_return res;
  }

  http::Response finish(const http::Request& req, const Route& route, http::Response res) {
    if (route.watch && !res.index) res.index = std::max<std::uint64_t>(1, ctx.store.answer_index(*route.watch));
    http::apply_cors(options.cors, req, res);
    return res;
  }

  // ---- Idempotency-Key: a write sent again with the key of an earlier one gets its answer ----
  std::set<std::string> keys_in_flight;  // answers not given yet (endpoints that wait)

  // The answer when the request ends here: the kept answer of this key, or why the key cannot
  // be used. Otherwise `keyed` is set when the write carries a key to remember.
  std::optional<http::Response> check_key(const http::Request& req, const Route& route,
                                          std::optional<KeyedWrite>& keyed) {
    if (!is_write(req.method) || !route.keep_answer) return std::nullopt;
    const auto key = req.header("idempotency-key");
    if (key.empty()) return std::nullopt;
    const bool printable = std::all_of(key.begin(), key.end(), [](unsigned char c) { return c > 32 && c < 127; });
    if (key.size() > 255 || !printable)
      return bad_request("header \"Idempotency-Key\": must be 1 to 255 printable ASCII characters without spaces");
    KeyedWrite k{std::string(key), fingerprint(req, {})};
    if (const auto* kept = ctx.store.idempotent_request(k.key)) {
      const auto colon = kept->fingerprint.find(':');
      const auto same = fingerprint(req, colon == std::string::npos ? "" : kept->fingerprint.substr(0, colon));
      if (same.empty())
        return http::error_response(422, "Idempotency-Key \"" + k.key +
                                             "\" was fingerprinted with a key since retired from the keyring; send "
                                             "the request again with a new key");
      if (kept->fingerprint != same)
        return http::error_response(422, "Idempotency-Key \"" + k.key + "\" was already used for another request (" +
                                             kept->method + " " + kept->target +
                                             " with another body); send a new request with a new key");
      auto res = http::json_response(kept->body, kept->status);
      if (kept->answer_index) res.index = kept->answer_index;
      res.set_header("Idempotent-Replayed", "true");
      return res;
    }
    if (keys_in_flight.contains(k.key))
      return http::error_response(409, "a request with Idempotency-Key \"" + k.key +
                                           "\" is still being answered; send it again once that one is done");
    keyed = std::move(k);
    return std::nullopt;
  }

  // What identifies a request for its Idempotency-Key: an HMAC under the keyring's key `key_id`
  // ("" = the active one; "" back when the keyring no longer has it), so the state never holds a
  // bare hash of a body that carried secrets. Without a keyring (in-process tests), a SHA-256.
  std::string fingerprint(const http::Request& req, const std::string& key_id) const {
    if (!options.keyring) return request_fingerprint(req.method, req.target, req.body);
    const std::string data = req.method + "\n" + req.target + "\n" + req.body;
    return options.keyring->fingerprint(key_id, data).value_or("");
  }

  // Keeps a successful answer under its key. Called in the same executor turn as the endpoint's
  // last commit, so with group commit both reach the disk in one backend transaction: a retry
  // after any crash finds both or neither. A refusal changed nothing and is not kept: the same
  // request may well succeed later.
  void remember(const http::Request& req, const KeyedWrite& k, const http::Response& res) {
    if (res.status < 200 || res.status >= 300) return;
    const auto now = domain::now();
    Batch batch;
    batch.remember(IdempotentRequest{.key = k.key,
                                     .method = req.method,
                                     .target = req.target,
                                     .fingerprint = k.fingerprint,
                                     .status = res.status,
                                     .body = res.body,
                                     .answer_index = res.index.value_or(0),
                                     .time = now});
    // Answers older than the retention go in the same write, a few at a time.
    for (const auto& old : ctx.store.requests_answered_before(now - kIdempotencyKeyTtl, 16)) batch.forget_request(old);
    // A failed write fails the answer's durability wait (503), so the client retries.
    (void)ctx.store.commit(std::move(batch));
  }

  struct InFlight {
    std::set<std::string>& keys;
    std::string key;
    ~InFlight() { keys.erase(key); }
  };

  std::chrono::milliseconds jitter(std::chrono::milliseconds wait) {
    auto span = wait.count() / 16;
    if (span <= 0) return wait;
    std::uniform_int_distribution<long long> dist(0, span);
    return wait + std::chrono::milliseconds(dist(rng));
  }

  // A blocking query: returns when what the route shows changed after `b.index`, when the wait
  // is over, or at shutdown. A read of one object waits for that object, as Nomad's per-object
  // watch does; waking on every change of its table cost, with eight clients each watching its
  // own volume, an answer, a TLS record and a client's parse per wake-up of every one of them
  // (the lifecycle bench). The object's change may not be durable yet: the answer waits for that.
  boost::asio::awaitable<void> wait_for_change(const Route& route, const http::Request& req, const Blocking& b) {
    const auto deadline = std::chrono::steady_clock::now() + jitter(b.wait);
    const auto object_index = [&] { return route.watch_index ? route.watch_index(ctx.store, req) : std::nullopt; };
    const bool one_object = object_index().has_value();  // else (none stored yet) the table
    std::uint64_t seen = b.index;
    for (;;) {
      if (one_object) {
        const auto object = object_index();
        if (!object || *object > b.index) co_return;  // changed or gone
      }
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) co_return;
      const std::uint64_t after = co_await ctx.store.wait_for_change(b.table, seen, deadline - now);
      // Timed out, shutting down, or the table moved when no one object is watched.
      if (after <= seen || ctx.store.released() || !one_object) co_return;
      seen = after;
    }
  }

  // mooring_http_requests_seconds: the series of each (route, status) is looked up once. A request
  // that matched no route counts under "unmatched", so probing random paths adds no series.
  void observe(std::string_view pattern, unsigned status, std::chrono::steady_clock::duration took) {
    if (!http_seconds) return;
    auto it = http_series.find({pattern, status});
    if (it == http_series.end())
      it = http_series
               .emplace(std::pair{pattern, status},
                        http_seconds.with({{"route", std::string(pattern)}, {"code", std::to_string(status)}}))
               .first;
    it->second.observe(took);
  }

  Context ctx;
  ApiOptions options;
  http::Router<Route> router;
  metrics::HistogramFamily http_seconds;                                            // null with metrics off
  std::map<std::pair<std::string_view, unsigned>, metrics::Histogram> http_series;  // views into `router`
  std::minstd_rand rng{std::random_device{}()};
  UnparsedRefusals unparsed;
};

Api::Api(StateStore& store, volumes::VolumeLifecycle& volumes, ApiOptions options)
    : impl_(std::make_unique<Impl>(store, volumes, std::move(options))) {}
Api::~Api() = default;

std::vector<RouteInfo> Api::route_table() {
  std::vector<RouteInfo> out;
  for (const auto& e : route_entries()) out.push_back({e.method, e.pattern, e.route.need});
  return out;
}

boost::asio::awaitable<http::Response> Api::handle(http::Request req) {
  Answered answered{.started = std::chrono::steady_clock::now()};
  http::Response res;
  try {
    res = co_await answer(req, answered);
  } catch (...) {
    // A bug, or a forced shutdown cancelling the answer: audited like any answer, with its caller.
    res = http::answer_exception(std::current_exception(), req);
  }
  // Writes only, whatever the answer (a refusal is worth auditing too).
  if (is_write(req.method))
    audit_write(impl_->options.audit, req, res, answered.accessor, audited_object(answered.object, req, res),
                std::string(req.param("namespace").value_or("")));  // set by prepare() on namespaced routes
  impl_->observe(answered.pattern, res.status, std::chrono::steady_clock::now() - answered.started);
  co_return res;
}

void Api::record_refusal(const http::Request& req, const http::Response& res) {
  if (req.method.empty()) {  // not HTTP: logged, not audited (UnparsedRefusals says why)
    if (auto left_out = impl_->unparsed.take(std::chrono::steady_clock::now()))
      impl_->ctx.log.warn("refused a request that is not HTTP (not audited)",
                          {{"remote", req.remote},
                           {"status", static_cast<int64_t>(res.status)},
                           {"left_out_since_last", static_cast<int64_t>(*left_out)}});
    return;
  }
  audit_write(impl_->options.audit, req, res, {}, {}, {});  // no route: no token, object or namespace was read
}

boost::asio::awaitable<http::Response> Api::answer(http::Request& req, Answered& answered) {
  const Route* route = nullptr;
  std::optional<Blocking> blocking;
  std::optional<Caller> caller;
  auto early = impl_->prepare(req, route, blocking, caller);
  if (caller) answered.accessor = caller->accessor;
  if (route) {
    answered.pattern = route->pattern;
    answered.object = route->object;
  }
  if (early) {
    http::apply_cors(impl_->options.cors, req, *early);
    co_return *early;
  }
  if (blocking && blocking->index > 0) {
    co_await impl_->wait_for_change(*route, req, *blocking);
    answered.started = std::chrono::steady_clock::now();  // the answer's time, not the wait for a change
    // The token may have been deleted or its policies changed meanwhile.
    if (auto refusal = impl_->authorize(req, *route, caller)) {
      http::apply_cors(impl_->options.cors, req, *refusal);
      co_return *refusal;
    }
  }
  if (route->event_stream) co_return impl_->finish(req, *route, impl_->open_stream(req, *route, std::move(caller)));
  // Counted after a blocking wait: a flush that failed during the wait took nothing this answer sees.
  const auto failed_flushes = impl_->ctx.store.failed_flushes();
  http::Response res;  // not a ?: around co_await: GCC 12 miscompiles that (use after free)
  std::optional<KeyedWrite> keyed;
  if (auto kept = impl_->check_key(req, *route, keyed)) {
    res = impl_->finish(req, *route, std::move(*kept));  // a kept answer, once it is durable
  } else {
    std::optional<Impl::InFlight> in_flight;
    if (keyed)
      in_flight.emplace(Impl::InFlight{impl_->keys_in_flight, *impl_->keys_in_flight.insert(keyed->key).first});
    auto answer = co_await impl_->call(*route, req);
    if (keyed) impl_->remember(req, *keyed, answer);  // same turn as the endpoint's last commit
    res = impl_->finish(req, *route, Impl::filter(caller, *route, req, std::move(answer)));
  }
  // With group commit the answer may show commits not yet on disk; it leaves only once they are.
  // A read on a degraded leader does not wait for a flush etcd cannot answer (StateStore::readable_since).
  domain::Status st;  // (no ?: around co_await, as above)
  if (req.method == "GET" || req.method == "HEAD")
    st = co_await impl_->ctx.store.readable_since(failed_flushes);
  else
    st = co_await impl_->ctx.store.durable_since(failed_flushes);
  if (!st) co_return impl_->finish(req, *route, http::error_response(503, st.error()));
  co_return res;
}

}  // namespace mooring::controlplane::api
