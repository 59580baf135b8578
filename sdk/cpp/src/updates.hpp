// Artifact signatures and the verified download (updates.cpp), declared for the unit tests.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "internal.hpp"

namespace keywarden::detail {

/** "kwart1." app_id "." version "." filename "." sha512 hex: what an artifact's signature covers. */
std::string artifactMessage(const std::string& appId, const std::string& version, const std::string& filename,
                            const std::string& sha512Hex);
/** Throws UpdateError unknown_kid or bad_signature unless the artifact's signature holds under `keys`. */
void verifyArtifact(const PinnedKeys& keys, const Artifact& artifact);
/** An upgrade answer's offer, every artifact verified; Error(verification, malformed) for a bad field. */
UpdateOffer parseOffer(const nlohmann::json& upgrade, const std::string& appId, const PinnedKeys& keys);
/** Streams, verifies, renames into place; returns the target path. Throws UpdateError. */
std::string downloadArtifact(const PinnedKeys& keys, const Artifact& artifact, const std::string& targetPath,
                             const ProgressCallback& progress, std::chrono::milliseconds timeout, const std::string& proxy,
                             const std::string& caBundle);

}  // namespace keywarden::detail
