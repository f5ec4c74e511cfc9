// The dashboard's static files (web/), embedded in the binary at build time (cmake/embed_web.cmake).
#pragma once

#include <span>
#include <string_view>

namespace floodgate::server {

struct WebAsset {
  std::string_view path;          ///< "/index.html", "/app.js", …
  std::string_view content_type;
  std::string_view body;
};

/// Every embedded file. The page is plain HTML, CSS and JavaScript written for floodgate: no
/// framework, no build step, nothing fetched from another origin.
std::span<const WebAsset> web_assets() noexcept;

}  // namespace floodgate::server
