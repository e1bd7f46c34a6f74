// `zinc serve`'s HTTP side: an OpenAI-compatible API over the serving engine.
//   POST /v1/chat/completions, POST /v1/completions, GET /v1/models,
//   GET /health, GET /metrics
// Each HTTP connection thread parses and checks its request, renders the prompt,
// submits it to the engine and then streams (SSE) or collects the reply. The text
// side of generation (detokenizing, stop strings, reasoning, tool calls) runs in the
// engine's on_token callback, so a stop string ends the request at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "server/api_request.h"
#include "text/tokenizer.h"

namespace zinc::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                         // 0: any free port
  std::string api_key;                     // empty: no authentication
  int read_timeout_seconds = 30;           // a client slower than this is dropped
  size_t max_body_bytes = size_t{16} << 20;  // larger bodies get 413
  ServerDefaults defaults;
};

// What the server needs of the loaded model; all of it must outlive the server.
struct ServedModel {
  const text::Tokenizer& tokenizer;
  std::string chat_template;  // empty: /v1/chat/completions answers 400
  std::vector<int32_t> eog_ids;
  Engine& engine;
};

class HttpServer {
 public:
  HttpServer(ServedModel model, ServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the socket and returns the port. Throws when it cannot.
  int bind();
  // Serves until stop(); call after bind().
  void serve();
  void stop();  // thread-safe

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zinc::server
