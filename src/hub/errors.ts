// The one error a pull throws. Its message is the whole story for a person
// (what failed, and the way out); its kind lets a caller pick an exit code or
// an HTTP status without reading the message.

export type HubErrorKind =
  /** The reference is not `org/repo[:TAG]`. */
  | "bad_reference"
  /** The Hub has no such repository (or it is private and no token was accepted). */
  | "not_found"
  /** The repository has no GGUF file for the tag. */
  | "no_file"
  /** Gated or private: a token is missing or its owner has not accepted the licence. */
  | "gated"
  /** The Hub, its CDN or the proxy could not be reached. */
  | "network"
  /** HF_HUB_OFFLINE / --offline and the reference is not in the cache. */
  | "offline"
  /** Not enough free disk before the first byte. */
  | "disk_space"
  /** The disk filled (or refused a write) during the download; the partial file is kept. */
  | "disk_full"
  /** A downloaded file's hash is not the one the Hub published. */
  | "integrity"
  /** Any other answer the Hub gave that a pull cannot go on from. */
  | "hub";

export class HubError extends Error {
  constructor(
    readonly kind: HubErrorKind,
    message: string,
  ) {
    super(message);
    this.name = "HubError";
  }
}
