// Serves the CatSet sync hook on uc's bus until SIGINT or SIGTERM, with the
// JavaScript SDK (sdk/js). --nats-url or NATS_URL says where the bus is;
// --nats-user/--nats-password, --nats-token, --nats-creds and --nats-tls-*
// (or NATS_USER … NATS_TLS_KEY) how to log in.
import { serve } from "@universalcontroller/worker";
import { sync } from "./catset.js";

serve("catset-controller", { sync });
