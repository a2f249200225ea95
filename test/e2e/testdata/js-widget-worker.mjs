// The Widget controller's hook (widgetSync in roles_test.go) in JavaScript,
// with the JavaScript SDK (sdk/js): every Widget gets one ConfigMap named
// after it, carrying its spec.value. The NATS flags come on the command line.
import { serve } from "../../../sdk/js/index.js";

serve("widget-controller", {
  sync({ parent }) {
    const { name } = parent.metadata;
    const value = parent.spec?.value ?? "";
    return { children: [{ apiVersion: "v1", kind: "ConfigMap", metadata: { name }, data: { widget: name, value } }] };
  },
});
