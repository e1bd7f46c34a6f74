// An error answered in OpenAI's shape:
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
// with the HTTP status that goes with it.
#pragma once

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace zinc::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = {}, std::string code = {})
      : std::runtime_error(std::move(message)), status_(status), param_(std::move(param)), code_(std::move(code)) {}

  int status() const { return status_; }
  // OpenAI's error types by status.
  std::string type() const {
    switch (status_) {
      case 401: return "authentication_error";
      case 404: return "not_found_error";
      case 429: case 503: return "server_overloaded";
      default: return status_ >= 500 ? "server_error" : "invalid_request_error";
    }
  }
  nlohmann::json body() const {
    nlohmann::json e = {{"message", what()}, {"type", type()}, {"param", nullptr}, {"code", nullptr}};
    if (!param_.empty()) e["param"] = param_;
    if (!code_.empty()) e["code"] = code_;
    return {{"error", e}};
  }

 private:
  int status_;
  std::string param_, code_;
};

}  // namespace zinc::server
