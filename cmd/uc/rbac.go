package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/internal/rbac"
)

func rbacCommand() *cobra.Command {
	var in rbac.Input
	var kubeconfig, dispatcher string
	c := &cobra.Command{
		Use:   "rbac [FILE|DIR...]",
		Short: "Print the RBAC a controller needs, made from its controller object",
		Long: `Prints, as YAML to apply with the controller, the RBAC uc's roles need to
run each controller object (UniversalController, UniversalDecorator, and
Metacontroller's CompositeController and DecoratorController) in the files and
directories given, or read from the cluster with --from-cluster:

  - per role, a ClusterRole labelled universalcontroller.dev/aggregate-to-<role>,
    which uc's aggregated ClusterRole of the role (uc-watcher, uc-dispatcher,
    uc-applier) takes in within seconds: exactly the verbs the role uses on
    each of the controller's kinds. Every role lists and watches the parents
    and children; the applier gets, patches and writes the status of parents,
    creates, patches and deletes children; the dispatcher watches the objects
    of destination hooks;
  - per namespace of the Secrets and ConfigMaps its webhooks' connections
    name (caBundle, clientTLS, authorization, basicAuth), a Role that lets
    the dispatcher get those objects by name, and nothing else, bound to the
    dispatcher's ServiceAccount. The dispatcher has no other access to
    Secrets and ConfigMaps.

Resources are taken by the names uc asks the apiserver for: a resource is
looked up in the cluster's discovery (with --kubeconfig or --from-cluster),
in the CustomResourceDefinitions among the files given, and in Kubernetes'
built-in kinds; one none of them knows is an error that names it. The
related objects of a customize hook are named by its replies, at run time:
give the resources they may be of with --related, or the watcher cannot read
them (the output warns).

Exits 0 when it printed the RBAC of every controller object, 1 when one
cannot be resolved, 2 on a wrong command line (a file that does not exist).`,
		Example: `  uc rbac examples/foo/crd.yaml examples/foo/controller.yaml | kubectl apply -f -

  # a controller registered on the cluster, and its customize hook's ConfigMaps
  uc rbac --from-cluster my-controller --related core/configmaps

  # a Helm release "prod" in namespace platform
  uc rbac --dispatcher-service-account platform:prod-uc-dispatcher controller.yaml`,
		Args: cobra.ArbitraryArgs, // files and directories, checked below
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && len(in.FromCluster) == 0 {
				return errors.New("give the files or directories of controller objects, or --from-cluster")
			}
			for _, path := range args {
				if _, err := os.Stat(path); err != nil {
					return err
				}
			}
			ns, name, ok := strings.Cut(dispatcher, ":")
			if !ok || ns == "" || name == "" {
				return fmt.Errorf("--dispatcher-service-account %q: want NAMESPACE:NAME", dispatcher)
			}
			in.Dispatcher = types.NamespacedName{Namespace: ns, Name: name}
			in.Paths = args
			in.Command = commandLine(cmd, args)
			if kubeconfig != "" || len(in.FromCluster) > 0 {
				cfg, err := kubeClientConfig(kubeconfig).ClientConfig()
				if err != nil {
					return fmt.Errorf("kubeconfig: %w", err)
				}
				in.Cluster = cfg
			}
			if err := rbac.Generate(cmd.Context(), in, cmd.OutOrStdout()); err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "uc rbac: %v\n", err)
				return errLogged
			}
			return nil
		},
	}
	fs := c.Flags()
	fs.StringArrayVar(&in.FromCluster, "from-cluster", nil, "[KIND/]NAME: read this controller object from the cluster (KIND universalcontroller, the default, universaldecorator, compositecontroller or decoratorcontroller); repeatable")
	fs.StringArrayVar(&in.Related, "related", nil, "GROUP/RESOURCE (core/configmaps, apps/deployments) that a customize hook's related objects may be of: the watcher lists and watches it; repeatable")
	fs.StringVar(&kubeconfig, "kubeconfig", "", "ask this cluster's discovery for the resources (default with --from-cluster: $KUBECONFIG, ~/.kube/config; without, the CRDs given and Kubernetes' built-in kinds)")
	fs.StringVar(&dispatcher, "dispatcher-service-account", "uc-system:uc-dispatcher", "NAMESPACE:NAME of the dispatcher's ServiceAccount, which gets the webhooks' Secrets and ConfigMaps")
	fs.BoolVar(&in.ShardWatchers, "shard-watchers", false, "the installation shards its watchers (uc --shard-watchers): the applier labels parents with their partition")
	return c
}

// commandLine is the command as given, for the output to say how it was
// made: the flags set, in order of their names, and the arguments.
func commandLine(cmd *cobra.Command, args []string) string {
	words := []string{cmd.CommandPath()}
	cmd.Flags().Visit(func(f *pflag.Flag) {
		values := []string{f.Value.String()}
		if s, ok := f.Value.(pflag.SliceValue); ok {
			values = s.GetSlice()
		}
		for _, v := range values {
			if f.Value.Type() == "bool" {
				words = append(words, "--"+f.Name)
			} else {
				words = append(words, "--"+f.Name, v)
			}
		}
	})
	return strings.Join(append(words, args...), " ")
}
