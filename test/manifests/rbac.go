package manifests

// AggregateLabel, followed by a role's name, labels the ClusterRoles whose
// rules the role's aggregated ClusterRole gets.
const AggregateLabel = "universalcontroller.dev/aggregate-to-"
