package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// RevisionResource is the GroupVersionResource of ControllerRevision objects.
var RevisionResource = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "controllerrevisions"}

// Labels on every ControllerRevision, naming the parent it belongs to.
const (
	// LabelRevisionController is the UniversalController's name.
	LabelRevisionController = Group + "/controller"
	// LabelRevisionParentUID is the parent's UID: the revisions of one
	// parent are listed with it.
	LabelRevisionParentUID = Group + "/parent-uid"
	// LabelRevisionParentName is the parent's name, for people.
	LabelRevisionParentName = Group + "/parent-name"
	// LabelRevisionParentResource is the parent's resource.group, e.g.
	// catsets.ctl.example.com.
	LabelRevisionParentResource = Group + "/parent-resource"
)

// ControllerRevision records one revision of a parent that rolls its
// children out: the values of the parent's revisionHistory.fieldPaths at that
// revision, and which children are on it. uc writes the progress of a rollout
// here before it touches a child, so a restart resumes where it stopped.
// Revisions belong to their parent and are garbage-collected with it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=ucrev,categories=uc-all
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=`.revision`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ControllerRevision struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Revision orders the revisions of one parent: a larger one is newer.
	Revision int64 `json:"revision"`
	// ParentPatch holds the parent's revisionHistory.fieldPaths, and only
	// them, as they were at this revision.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	ParentPatch runtime.RawExtension `json:"parentPatch"`
	// Children are the children on this revision, by apiGroup and kind.
	// +optional
	Children []RevisionChildren `json:"children,omitempty"`
}

// RevisionChildren names the children of one kind on a revision.
type RevisionChildren struct {
	// APIGroup is the children's API group ("" for the core group).
	APIGroup string `json:"apiGroup"`
	// Kind of the children, e.g. Pod.
	Kind string `json:"kind"`
	// Names of the children of this kind on the revision.
	// +listType=set
	Names []string `json:"names"`
}

// ControllerRevisionList is a list of ControllerRevision objects.
//
// +kubebuilder:object:root=true
type ControllerRevisionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ControllerRevision `json:"items"`
}
