// A Cloudflare Worker that rate-limits an origin with floodgate, through
// @floodgate/client's Workers helper: routes.ts says which paths are
// limited and how. Only the default export lives here: the Workers
// runtime takes every export of the main module as an entry point.
import { withRateLimit } from "@floodgate/client/worker";
import { checkFor, origin, type Env } from "./routes.js";

export default withRateLimit<Env>(origin, { check: checkFor });
