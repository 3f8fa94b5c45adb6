// tensorflow::ClientSession for the tensorflow-cpu wheel, written for fbnops' tf-cc export.
//
// The wheel ships client_session.h but its libtensorflow_cc.so.2 does not export the class, so a
// program that uses ClientSession fails to link. This file defines the class's members over the
// public tensorflow::Session API (NewSession, Session::Extend/Run), so unchanged ClientSession
// code builds and runs. It behaves as TensorFlow's own client_session.cc: nodes added to the
// scope's graph since the last Run are sent to the session (Extend) before each Run, a feed's
// Input::Initializer status is returned before anything runs, and the scope's status is NOT
// consulted (a node that failed shape inference is still in the graph and fails in the kernel).
// Compiled once per TensorFlow version into a cache, and linked into every exported program.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensorflow/cc/client/client_session.h"
#include "tensorflow/core/graph/graph.h"
#include "tensorflow/core/platform/mutex.h"
#include "tensorflow/core/public/session.h"

namespace tensorflow {

class ClientSession::Impl {
 public:
  Impl(Session* session, std::shared_ptr<Graph> graph)
      : session_(session), graph_(std::move(graph)) {}

  // Sends the nodes built since the last call to the session.
  absl::Status MaybeExtendGraph() const {
    mutex_lock lock(mu_);
    const int num_nodes = graph_->num_node_ids();
    if (num_nodes <= last_num_graph_nodes_) return absl::OkStatus();
    GraphDef graph_def;
    graph_->ToGraphDefSubRange(&graph_def, last_num_graph_nodes_);
    last_num_graph_nodes_ = num_nodes;
    return session_->Extend(graph_def);
  }

  const std::unique_ptr<Session> session_;
  const std::shared_ptr<Graph> graph_;
  mutable mutex mu_;
  mutable int last_num_graph_nodes_ = 0;
};

namespace {
SessionOptions WithTarget(const std::string& target) {
  SessionOptions options;
  options.target = target;
  return options;
}
}  // namespace

ClientSession::ClientSession(const Scope& scope, const std::string& target)
    : ClientSession(scope, WithTarget(target)) {}

ClientSession::ClientSession(const Scope& scope) : ClientSession(scope, "") {}

ClientSession::ClientSession(const Scope& scope, const SessionOptions& session_options) {
  Session* session = nullptr;
  TF_CHECK_OK(NewSession(session_options, &session));  // as TensorFlow: no session is fatal
  impl_.reset(new Impl(session, scope.graph_as_shared_ptr()));
}

ClientSession::~ClientSession() = default;

absl::Status ClientSession::Run(const std::vector<Output>& fetch_outputs,
                                std::vector<Tensor>* outputs) const {
  return Run(FeedType{}, fetch_outputs, {}, outputs);
}

absl::Status ClientSession::Run(const FeedType& inputs, const std::vector<Output>& fetch_outputs,
                                std::vector<Tensor>* outputs) const {
  return Run(inputs, fetch_outputs, {}, outputs);
}

absl::Status ClientSession::Run(const FeedType& inputs, const std::vector<Output>& fetch_outputs,
                                const std::vector<Operation>& run_outputs,
                                std::vector<Tensor>* outputs) const {
  return Run(RunOptions(), inputs, fetch_outputs, run_outputs, outputs, nullptr);
}

absl::Status ClientSession::Run(const RunOptions& run_options, const FeedType& inputs,
                                const std::vector<Output>& fetch_outputs,
                                const std::vector<Operation>& run_outputs,
                                std::vector<Tensor>* outputs, RunMetadata* run_metadata) const {
  std::vector<std::pair<std::string, Tensor>> feeds;
  feeds.reserve(inputs.size());
  for (const auto& feed : inputs) {
    TF_RETURN_IF_ERROR(feed.second.status);  // e.g. a ragged initializer list
    feeds.emplace_back(feed.first.name(), feed.second.tensor);
  }
  std::vector<std::string> fetch_names;
  fetch_names.reserve(fetch_outputs.size());
  for (const Output& output : fetch_outputs) fetch_names.push_back(output.name());
  std::vector<std::string> target_names;
  target_names.reserve(run_outputs.size());
  for (const Operation& op : run_outputs) target_names.push_back(op.node()->name());
  TF_RETURN_IF_ERROR(impl()->MaybeExtendGraph());
  return impl()->session_->Run(run_options, feeds, fetch_names, target_names, outputs, run_metadata);
}

}  // namespace tensorflow
