import type { IncomingMessage, ServerResponse } from "node:http";
import type { CheckRequest, ClientOptions, FailureMode, Floodgate } from "./index.js";

export declare const DEFAULT_API_KEY_HEADER: string;
export declare const DEFAULT_IPV6_PREFIX: number;

/** A limit without its key: a policy, or an algorithm and an inline limit. */
export type KeylessLimit = Omit<CheckRequest, "key">;

export interface RateLimitOptions {
  /** A client, or the options to make one. */
  floodgate: Floodgate | Omit<ClientOptions, "failureMode">;
  /** The limit of an API key, and of an IP unless ipLimit is set. */
  limit: KeylessLimit;
  /** The limit of a client IP; default limit. */
  ipLimit?: KeylessLimit;
  /** The header that carries an API key; default "x-api-key". */
  apiKeyHeader?: string;
  /** Whether a key is genuine: then it alone limits, and a rejected key counts as none. */
  verifyApiKey?: (req: IncomingMessage, key: string) => boolean | Promise<boolean>;
  /** Limit verified keys by IP too. */
  perIpAndKey?: boolean;
  /** Reverse proxies in front that append to X-Forwarded-For; default 0 (the socket's address). */
  trustedProxyHops?: number;
  /** Leading bits of an IPv6 address that key it; default 64. */
  ipv6Prefix?: number;
  /** Put before every key. */
  keyPrefix?: string;
  /** When floodgate cannot decide: "open" (default) lets the request through, "closed" answers 503. */
  failureMode?: FailureMode;
  /** Told of every error from floodgate. */
  onError?: (err: Error, req: IncomingMessage) => void;
}

/** The Express/Connect middleware. */
export declare function rateLimit(options: RateLimitOptions): (req: IncomingMessage, res: ServerResponse, next: (err?: unknown) => void) => Promise<void>;

/** The client address of a request, an IPv6 one as its prefix. */
export declare function clientIP(req: IncomingMessage, options?: { trustedProxyHops?: number; ipv6Prefix?: number }): string;
