#include "shared/async/serial_worker.hpp"

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <condition_variable>
#include <exception>
#include <future>
#include <list>
#include <map>
#include <mutex>
#include <thread>

#include "shared/log/log.hpp"

namespace mooring::async {

namespace asio = boost::asio;

struct SerialWorker::Impl {
  struct Job {
    std::string key;  // empty: never replaced
    std::function<void()> run;
  };

  explicit Impl(std::string n) : name(std::move(n)) {}

  void enqueue(std::string key, std::function<void()> run) {
    {
      std::lock_guard lock(mutex);
      if (!key.empty()) {
        if (auto it = waiting.find(key); it != waiting.end()) {
          it->second->run = std::move(run);
          return;
        }
      }
      queue.push_back(Job{key, std::move(run)});
      if (!key.empty()) waiting[key] = std::prev(queue.end());
    }
    wake.notify_one();
  }

  void loop() {
    std::unique_lock lock(mutex);
    for (;;) {
      wake.wait(lock, [&] { return stopping || !queue.empty(); });
      if (queue.empty()) return;  // stopping, and everything queued has run
      Job job = std::move(queue.front());
      queue.pop_front();
      if (!job.key.empty()) waiting.erase(job.key);
      lock.unlock();
      try {  // nothing may end the thread: later jobs and fences would never complete
        job.run();
      } catch (const std::exception& e) {
        log::Logger("serial-worker")
            .error("a queued job failed", {{"worker", name}, {"job", job.key}, {"error", e.what()}});
      }
      lock.lock();
    }
  }

  std::string name;
  std::mutex mutex;
  std::condition_variable wake;
  std::list<Job> queue;
  std::map<std::string, std::list<Job>::iterator> waiting;  // key -> its job, not started yet
  bool stopping = false;
  std::thread thread;
};

SerialWorker::SerialWorker(std::string name) : impl_(std::make_unique<Impl>(std::move(name))) {
  impl_->thread = std::thread([impl = impl_.get()] { impl->loop(); });
}

SerialWorker::~SerialWorker() {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->wake.notify_one();
  impl_->thread.join();
}

void SerialWorker::submit(std::function<void()> job) { impl_->enqueue({}, std::move(job)); }

void SerialWorker::submit(const std::string& key, std::function<void()> job) { impl_->enqueue(key, std::move(job)); }

asio::awaitable<void> SerialWorker::run(std::function<void()> job) {
  std::exception_ptr failure;
  co_await asio::async_initiate<const asio::use_awaitable_t<>&, void()>(
      [this, &job, &failure](auto handler) {
        // The handler owns the awaiting frame, so `job` and `failure` live until it is called.
        auto h = std::make_shared<decltype(handler)>(std::move(handler));
        // Tracked: the io_context keeps running while the job is queued.
        auto ex = asio::prefer(asio::get_associated_executor(*h), asio::execution::outstanding_work.tracked);
        impl_->enqueue({}, [h, ex, &job, &failure]() {
          try {
            job();
          } catch (...) {
            failure = std::current_exception();
          }
          asio::post(ex, [h]() { (*h)(); });
        });
      },
      asio::use_awaitable);
  if (failure) std::rethrow_exception(failure);
}

asio::awaitable<void> SerialWorker::drained() {
  return run([] {});
}

void SerialWorker::wait_drained() {
  std::promise<void> reached;
  impl_->enqueue({}, [&reached] { reached.set_value(); });
  reached.get_future().wait();
}

}  // namespace mooring::async
