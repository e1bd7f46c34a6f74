// GET /metrics: the engine's counters and the HTTP request counts in Prometheus'
// text exposition format (version 0.0.4).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "runtime/engine.h"

namespace zinc::server {

// (path, status) -> requests answered.
using HttpCounts = std::map<std::pair<std::string, int>, int64_t>;

std::string prometheus_text(const EngineMetrics& m, const HttpCounts& http);

}  // namespace zinc::server
