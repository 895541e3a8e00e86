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

// Package errorlist turns many errors into one message of bounded size:
// "first 10 of N errors: [...]".
//
// Validation reports every problem it finds, which is what a user wants for
// three typos and what nobody wants for three thousand: a 10 KiB config with
// one bad value per list entry holds thousands of problems, and joining them
// all grows the message (and, joined naively, the time to build it) without
// bound. Such messages travel in gRPC responses to the kubelet (4 MiB at
// most, for every claim of a pod together), in events and in logs, so every
// place that aggregates errors from user input summarizes them here.
//
// It imports nothing but the standard library, so any layer may use it.
package errorlist
