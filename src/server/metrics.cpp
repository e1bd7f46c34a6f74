// Prometheus text for GET /metrics (see metrics.h).
#include "server/metrics.h"

#include <cstdio>

namespace zinc::server {
namespace {

void metric(std::string& out, const char* name, const char* type, const char* help, double value) {
  char line[256];
  std::snprintf(line, sizeof line, "# HELP zinc_%s %s\n# TYPE zinc_%s %s\nzinc_%s %.17g\n", name, help, name, type,
                name, value);
  out += line;
}

double rate(int64_t tokens, double seconds) { return seconds > 0 ? static_cast<double>(tokens) / seconds : 0.0; }

}  // namespace

std::string prometheus_text(const EngineMetrics& m, const HttpCounts& http) {
  std::string out;
  metric(out, "requests_total", "counter", "Generation requests submitted to the engine.", double(m.requests_total));
  metric(out, "requests_running", "gauge", "Requests holding a slot.", double(m.requests_running));
  metric(out, "requests_waiting", "gauge", "Requests queued for a slot (queue depth).", double(m.requests_waiting));
  metric(out, "prompt_tokens_total", "counter", "Prompt tokens of admitted requests (tokens in).",
         double(m.prompt_tokens_total));
  metric(out, "generated_tokens_total", "counter", "Tokens generated (tokens out).", double(m.generated_tokens_total));
  metric(out, "cached_tokens_total", "counter", "Prompt tokens restored from the prefix cache (cache hits).",
         double(m.cached_tokens_total));
  metric(out, "prompt_seconds_total", "counter", "Seconds from admission to first token, summed over requests.",
         m.prompt_seconds_total);
  metric(out, "generation_seconds_total", "counter", "Seconds from first token to finish, summed over requests.",
         m.generation_seconds_total);
  metric(out, "prompt_tokens_per_second", "gauge", "Prompt tokens per second of prompt time, per request on average.",
         rate(m.prompt_tokens_total - m.cached_tokens_total, m.prompt_seconds_total));
  metric(out, "generation_tokens_per_second", "gauge", "Generated tokens per second of generation time, per request.",
         rate(m.generated_tokens_total, m.generation_seconds_total));
  metric(out, "prefix_cache_bytes", "gauge", "Bytes held by the prefix cache.", double(m.prefix_cache_bytes));
  metric(out, "prefix_cache_entries", "gauge", "Blocks held by the prefix cache.", double(m.prefix_cache_entries));
  metric(out, "prefix_cache_checkpoints", "gauge", "Recurrent-state checkpoints held by the prefix cache.",
         double(m.prefix_cache_checkpoints));
  out += "# HELP zinc_http_requests_total HTTP requests answered, by path and status.\n";
  out += "# TYPE zinc_http_requests_total counter\n";
  for (const auto& [key, n] : http)
    out += "zinc_http_requests_total{path=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"} " +
           std::to_string(n) + "\n";
  return out;
}

}  // namespace zinc::server
