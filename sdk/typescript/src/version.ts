// The SDK is released with the daemon and carries its version: the
// release tooling stamps both from one tag. A client checks the daemon's
// version on its first call (GET /v1/version).

/** The version of this SDK, the daemon release it was made with. */
export const SDK_VERSION = "0.1.0";

const release = /^v?(\d+)\.(\d+)\.(\d+)$/;

/**
 * compatible reports whether a daemon of version v serves this SDK: a
 * release (vMAJOR.MINOR.PATCH) must share the SDK's major and minor
 * version; anything else (a build between tags, a pseudo-version,
 * "devel") is a development daemon and is accepted.
 */
export function compatible(v: string, sdk: string = SDK_VERSION): boolean {
  const d = release.exec(v);
  const s = release.exec(sdk);
  if (!d || !s) return true;
  return d[1] === s[1] && d[2] === s[2];
}
