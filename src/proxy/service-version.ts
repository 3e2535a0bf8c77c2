/**
 * The service version (SPEC §2 `SERVICE_VERSION`, §6, §7): configured, or the last value the upstream
 * sent in the service-version header.
 */
import { parse, type SemVer } from 'semver';

/** Holds the known service version. */
export class ServiceVersion {
  #text: string | undefined;
  #parsed: SemVer | undefined;
  readonly #pinned: boolean;

  /**
   * Unknown until observed, unless configured.
   * @param configured `SERVICE_VERSION`; when set, upstream values are ignored.
   * @throws Nothing.
   */
  constructor(configured: SemVer | undefined) {
    this.#pinned = configured !== undefined;
    this.#parsed = configured;
    this.#text = configured?.version;
  }

  /** The version text to send in the service-version header, or `undefined` while unknown. */
  get text(): string | undefined {
    return this.#text;
  }

  /** The parsed version, or `undefined` while unknown. */
  get parsed(): SemVer | undefined {
    return this.#parsed;
  }

  /**
   * Learns the version from an upstream response header value; ignored when pinned by configuration
   * or when the value is not a semantic version.
   * @param value The upstream's service-version header (an array when repeated: ignored), or `undefined`.
   * @throws Nothing (`semver.parse` returns `null` for what is not a version).
   */
  observe(value: string | string[] | undefined): void {
    if (this.#pinned || typeof value !== 'string' || value === this.#text) return;
    const parsed = parse(value.trim());
    if (!parsed) return;
    this.#text = value.trim();
    this.#parsed = parsed;
  }
}
