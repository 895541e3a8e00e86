/*
Copyright The gpudra Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package scheduler

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// podTemplate returns the pod a workload controller (Deployment,
// ReplicaSet, StatefulSet, DaemonSet, ReplicationController, Job, CronJob)
// creates from its pod template, how many of them it asks for, a note on
// the owner ("", or " (one per node)") and the template's field path. The
// pod is named <workload>-0, as a StatefulSet names its first pod; the
// others name theirs with random suffixes, and nothing here depends on it.
func podTemplate(obj runtime.Object) (pod *v1.Pod, owner string, replicas int, path string, ok bool) {
	var meta metav1.ObjectMeta
	var tmpl *v1.PodTemplateSpec
	var count *int32
	path = "spec.template"
	switch o := obj.(type) {
	case *appsv1.Deployment:
		meta, tmpl, count = o.ObjectMeta, &o.Spec.Template, o.Spec.Replicas
	case *appsv1.ReplicaSet:
		meta, tmpl, count = o.ObjectMeta, &o.Spec.Template, o.Spec.Replicas
	case *appsv1.StatefulSet:
		meta, tmpl, count = o.ObjectMeta, &o.Spec.Template, o.Spec.Replicas
	case *appsv1.DaemonSet:
		meta, tmpl = o.ObjectMeta, &o.Spec.Template
		owner = " (one pod per node)"
	case *v1.ReplicationController:
		meta, tmpl, count = o.ObjectMeta, o.Spec.Template, o.Spec.Replicas
	case *batchv1.Job:
		meta, tmpl, count = o.ObjectMeta, &o.Spec.Template, jobActive(o.Spec)
	case *batchv1.CronJob:
		meta, tmpl, count = o.ObjectMeta, &o.Spec.JobTemplate.Spec.Template, jobActive(o.Spec.JobTemplate.Spec)
		path = "spec.jobTemplate.spec.template"
	default:
		return nil, "", 0, "", false
	}
	if tmpl == nil {
		tmpl = &v1.PodTemplateSpec{}
	}
	replicas = 1
	if count != nil {
		replicas = int(*count)
	}
	pod = &v1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: *tmpl.ObjectMeta.DeepCopy(),
		Spec:       *tmpl.Spec.DeepCopy(),
	}
	pod.Name = meta.Name + "-0"
	pod.Namespace = meta.Namespace
	return pod, owner, replicas, path, true
}

// jobActive is how many pods of a Job run at once: parallelism, but no
// more than the completions it asks for (the Job controller starts no
// pod beyond them).
func jobActive(spec batchv1.JobSpec) *int32 {
	if spec.Parallelism != nil && spec.Completions != nil && *spec.Completions < *spec.Parallelism {
		return spec.Completions
	}
	return spec.Parallelism
}

// workloadVersions are the API versions Kubernetes 1.34+ serves the
// workload kinds in; the scheme still knows older ones (apps/v1beta1,
// extensions/v1beta1, batch/v1beta1), which the API server rejects.
var workloadVersions = map[string]string{
	"Deployment": "apps/v1", "ReplicaSet": "apps/v1", "StatefulSet": "apps/v1", "DaemonSet": "apps/v1",
	"Job": "batch/v1", "CronJob": "batch/v1", "ReplicationController": "v1",
}
