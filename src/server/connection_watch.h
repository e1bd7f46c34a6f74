// Noticing that a client has gone while its request waits or generates. The HTTP
// library gives handlers no socket, so the connection is found by its addresses
// (the accepted socket whose peer and local ports match the request's) and then
// polled for a hang-up without reading from it.
#pragma once

#include <string>

namespace zinc::server {

// The accepted socket carrying a request from remote_addr:remote_port to
// local_port, or -1 when none matches.
int find_connection_fd(const std::string& remote_addr, int remote_port, int local_port);

// True once the peer has closed or reset the connection (never blocks).
bool peer_closed(int fd);

}  // namespace zinc::server
