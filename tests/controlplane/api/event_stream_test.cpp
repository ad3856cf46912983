// GET /v1/event/stream: the topic filter and the cursor as pure code, then the stream over real
// sockets — resumable by index, heartbeats, live events, a clean end on shutdown, and clients
// that go away leaving no connection and no waiter behind.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "services/controlplane/api/event_stream.hpp"
#include "tests/controlplane/support/api_server.hpp"
#include "tests/controlplane/support/http_client.hpp"

namespace mooring::controlplane {

using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

domain::Event event(std::uint64_t index, std::string topic, std::string key, std::string ns = "") {
  domain::Event e;
  e.index = index;
  e.topic = std::move(topic);
  e.type = "Test";
  e.key = std::move(key);
  e.ns = std::move(ns);
  e.message = "event " + std::to_string(index);
  return e;
}

std::vector<json> lines(const std::string& text) {
  std::vector<json> out;
  std::size_t start = 0;
  for (auto nl = text.find('\n'); nl != std::string::npos; start = nl + 1, nl = text.find('\n', start))
    out.push_back(json::parse(text.substr(start, nl - start)));
  return out;
}

auto everyone = [](const domain::Event&) { return true; };

}  // namespace

TEST(TopicFilterTest, UnknownTopicsAndEmptyKeysAreRefusedByName) {
  auto bad = api::TopicFilter::parse({"Volume", "Deployment"});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("unknown topic \"Deployment\""), std::string::npos) << bad.error();
  auto empty = api::TopicFilter::parse({"Volume:"});
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.error().find("empty key"), std::string::npos) << empty.error();
}

TEST(TopicFilterTest, TopicKeyAndWildcardsMatchWhatTheySay) {
  auto one = api::TopicFilter::parse({"Volume:vol-1", "Node"});
  ASSERT_TRUE(one);
  EXPECT_TRUE(one->matches(event(1, "Volume", "vol-1")));
  EXPECT_FALSE(one->matches(event(1, "Volume", "vol-2")));
  EXPECT_TRUE(one->matches(event(1, "Node", "n1")));
  EXPECT_FALSE(one->matches(event(1, "Allocation", "a1")));
  auto all = api::TopicFilter::parse({});
  ASSERT_TRUE(all);
  EXPECT_TRUE(all->matches(event(1, "Plugin", "p")));
  auto star = api::TopicFilter::parse({"*:vol-1"});
  ASSERT_TRUE(star);
  EXPECT_TRUE(star->matches(event(1, "Claim", "vol-1")));
  EXPECT_FALSE(star->matches(event(1, "Claim", "vol-2")));
}

TEST(EventCursorTest, OneLinePerIndexFromTheStartIndexUpToTheDurableOne) {
  std::deque<domain::Event> log{event(3, "Volume", "a"), event(5, "Volume", "b"), event(5, "Node", "n"),
                                event(7, "Volume", "c")};
  api::EventCursor cursor(4, *api::TopicFilter::parse({}), "default", everyone);
  auto out = lines(cursor.take(log, 6, 100));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]["Index"], 5);
  ASSERT_EQ(out[0]["Events"].size(), 2u);
  EXPECT_EQ(out[0]["Events"][0]["Key"], "b");
  EXPECT_EQ(cursor.next(), 7u);
  out = lines(cursor.take(log, 7, 100));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]["Index"], 7);
  EXPECT_TRUE(cursor.take(log, 7, 100).empty());
}

TEST(EventCursorTest, NamespaceAclAndPieceSizeFilter) {
  std::deque<domain::Event> log{event(1, "Volume", "a", "default"), event(2, "Volume", "b", "team"),
                                event(3, "Node", "n"), event(4, "Allocation", "x", "default"),
                                event(4, "Allocation", "y", "default"), event(5, "Volume", "z", "default")};
  api::EventCursor cursor(1, *api::TopicFilter::parse({}), "default",
                          [](const domain::Event& e) { return e.topic != "Allocation" || e.key == "x"; });
  // At most 2 events per piece, cut between indexes only.
  auto first = lines(cursor.take(log, 5, 2));
  ASSERT_EQ(first.size(), 2u);  // index 1 (default) and 3 (a node: no namespace); index 2 is another namespace
  EXPECT_EQ(first[0]["Index"], 1);
  EXPECT_EQ(first[1]["Index"], 3);
  auto second = lines(cursor.take(log, 5, 2));
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[0]["Events"].size(), 1u);  // y is not visible to this caller
  EXPECT_EQ(second[0]["Events"][0]["Key"], "x");
  EXPECT_EQ(second[1]["Index"], 5);
}

class EventStreamHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Batch b;
    b.add_event(event(0, "Volume", "vol-1", "default"));
    server.seed(std::move(b));
    Batch c;
    c.add_event(event(0, "Node", "node-1"));
    first_index = server.seed(std::move(c)) - 1;
    server.start();
  }

  void add_event(const std::string& topic, const std::string& key) {
    server.on_io([&] {
      Batch b;
      b.add_event(event(0, topic, key, "default"));
      auto r = server.store.commit(std::move(b));
      return r ? *r : 0;
    });
  }

  ApiServer server{api::ApiOptions{.event_heartbeat = 200ms}};
  std::uint64_t first_index = 0;
};

TEST_F(EventStreamHttpTest, StreamsFromAnIndexThenLiveWithHeartbeatsAsNdjson) {
  HttpLineStream s(server.port, "/v1/event/stream?index=" + std::to_string(first_index));
  ASSERT_EQ(s.status(), 200u);
  EXPECT_EQ(s.header("content-type"), "application/x-ndjson");
  EXPECT_EQ(s.header("transfer-encoding"), "chunked");
  auto a = s.next_line(5s);
  ASSERT_TRUE(a);
  auto one = json::parse(*a);
  EXPECT_EQ(one["Index"], first_index);
  EXPECT_EQ(one["Events"][0]["Key"], "vol-1");
  auto b = s.next_line(5s);
  ASSERT_TRUE(b);
  EXPECT_EQ(json::parse(*b)["Events"][0]["Topic"], "Node");
  // Nothing new: a heartbeat.
  auto hb = s.next_line(2s);
  ASSERT_TRUE(hb);
  EXPECT_EQ(*hb, "{}");
  add_event("Allocation", "alloc-1");
  std::optional<std::string> live;
  while ((live = s.next_line(5s)) && *live == "{}") {
  }
  ASSERT_TRUE(live);
  EXPECT_EQ(json::parse(*live)["Events"][0]["Key"], "alloc-1");
}

TEST_F(EventStreamHttpTest, ResumingAfterAnIndexSkipsWhatWasSeenAndTopicsFilter) {
  HttpLineStream s(server.port, "/v1/event/stream?topic=Node&index=" + std::to_string(first_index + 1));
  ASSERT_EQ(s.status(), 200u);
  auto line = s.next_line(5s);
  ASSERT_TRUE(line);
  EXPECT_EQ(json::parse(*line)["Index"], first_index + 1);
  add_event("Volume", "vol-2");
  add_event("Node", "node-2");
  std::optional<std::string> next;
  while ((next = s.next_line(5s)) && *next == "{}") {
  }
  ASSERT_TRUE(next);
  EXPECT_EQ(json::parse(*next)["Events"][0]["Key"], "node-2");  // vol-2 was filtered out
}

TEST_F(EventStreamHttpTest, BadParametersAre400AndChangeNothing) {
  auto r = http_request(server.port, "GET", "/v1/event/stream?topic=Jobs");
  EXPECT_EQ(r.status, 400u);
  EXPECT_NE(r.body.find("unknown topic \\\"Jobs\\\""), std::string::npos) << r.body;
  r = http_request(server.port, "GET", "/v1/event/stream?index=-1");
  EXPECT_EQ(r.status, 400u);
  EXPECT_NE(r.body.find("\\\"index\\\""), std::string::npos) << r.body;
}

TEST(EventStreamDisconnectTest, ClientsThatGoAwayLeaveNoConnectionOrWaiter) {
  ApiServer server;  // the default 10 s heartbeat: a disconnect must be noticed long before it
  server.start();
  std::vector<std::unique_ptr<HttpLineStream>> streams;
  for (int i = 0; i < 8; ++i) {
    streams.push_back(std::make_unique<HttpLineStream>(server.port, "/v1/event/stream"));
    ASSERT_EQ(streams.back()->status(), 200u);
  }
  using Counts = std::pair<std::size_t, std::size_t>;  // connections, blocked waiters
  auto counts = [&] { return server.on_io([&] { return Counts{server.server->connections(), server.store.waiter_count()}; }); };
  const auto deadline = std::chrono::steady_clock::now() + 3s;
  while (counts() != Counts{8, 8} && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(counts(), (Counts{8, 8}));
  for (auto& s : streams) s->close();
  const auto closed = std::chrono::steady_clock::now();
  while (counts() != Counts{0, 0} && std::chrono::steady_clock::now() < closed + 5s) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(counts(), (Counts{0, 0}));
  EXPECT_LT(std::chrono::steady_clock::now() - closed, 5s);
}

TEST_F(EventStreamHttpTest, ShutdownEndsTheBodyCleanly) {
  HttpLineStream s(server.port, "/v1/event/stream");
  ASSERT_EQ(s.status(), 200u);
  const auto t0 = std::chrono::steady_clock::now();
  server.stop();
  while (s.next_line(2s)) {
  }
  EXPECT_TRUE(s.clean_end());  // the last chunk, not a dropped connection
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
}

}  // namespace mooring::controlplane
