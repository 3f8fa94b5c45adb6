"""The fixed parts of the ``directml`` export: the D3D12/DirectML plumbing of ``main.cpp``, and ``run.sh``.

The plumbing follows Microsoft's HelloDirectML sample: a D3D12 device, queue, allocator and command
list; ``DMLCreateDevice``; per operator ``CreateOperator`` -> ``CompileOperator`` ->
``CreateOperatorInitializer``; a shader-visible descriptor heap and a binding table (initializer
first, then ``Reset`` for the compiled operator); temporary/persistent resources when asked for;
upload, ``RecordDispatch``, UAV barrier, copy to a readback heap, fence wait, ``Map``.
"""

from __future__ import annotations

from ._cpp_text import comment, renamed_comment
from ._plan import ExportPlan

SEED = (
    "DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC structure (directml.h), "
    "https://learn.microsoft.com/en-us/windows/win32/api/directml/ns-directml-dml_batch_normalization_grad_operator_desc"
)
NOT_HERE = (
    "DirectML.h is only in Microsoft's Microsoft.AI.DirectML NuGet package and the Windows SDK (no Linux "
    "registry has it): build main.cpp on Windows with the Windows SDK and DirectML (link d3d12.lib DirectML.lib)"
)

_PLUMBING = r"""struct Tensor {  // a host tensor in TensorFlow's shape and layout (float32)
    std::vector<int64_t> shape;
    std::vector<float> data;
};

Tensor LoadNpy(const std::string &path) {
    npy::Array a = npy::load(path);
    if (a.descr != "<f4") throw std::runtime_error(path + ": expected float32 data");
    Tensor t{a.shape, std::vector<float>(a.bytes.size() / 4)};
    std::memcpy(t.data.data(), a.bytes.data(), a.bytes.size());
    return t;
}

void SaveNpy(const std::string &path, const Tensor &t) {
    npy::Array a{"<f4", t.shape, std::vector<uint8_t>(t.data.size() * 4)};
    std::memcpy(a.bytes.data(), t.data.data(), a.bytes.size());
    npy::save(path, a);
}


Tensor Zeros(std::vector<int64_t> shape) { return {shape, std::vector<float>(size_t(npy::element_count(shape)))}; }

Tensor Transpose(const Tensor &x, std::vector<int64_t> perm) {  // TF Transpose: y.shape[i] = x.shape[perm[i]]
    std::vector<int64_t> shape(perm.size()), in_strides(perm.size(), 1);
    for (size_t i = perm.size(); i-- > 1;) in_strides[i - 1] = in_strides[i] * x.shape[i];
    for (size_t i = 0; i < perm.size(); ++i) shape[i] = x.shape[perm[i]];
    Tensor y = Zeros(shape);
    std::vector<int64_t> index(perm.size(), 0);
    for (float &out : y.data) {  // walk y in order; read x at the permuted index
        int64_t offset = 0;
        for (size_t i = 0; i < perm.size(); ++i) offset += index[i] * in_strides[perm[i]];
        out = x.data[size_t(offset)];
        for (size_t i = perm.size(); i-- > 0 && ++index[i] == shape[i];) index[i] = 0;
    }
    return y;
}

Tensor Bessel(const Tensor &variance, int64_t n) {  // TF: variance * (n / max(n - 1, 1)), in float32
    Tensor t = variance;
    const float adjust = float(n) / float(n > 1 ? n - 1 : 1);
    for (float &v : t.data) v *= adjust;
    return t;
}

void Check(HRESULT hr, const char *what) {  // print the failing call's HRESULT and stop
    if (FAILED(hr)) {
        std::fprintf(stderr, "%s failed: HRESULT 0x%08lX\n", what, static_cast<unsigned long>(hr));
        std::exit(1);
    }
}

struct Context {
    ComPtr<ID3D12Device> d3d12;
    ComPtr<ID3D12CommandQueue> queue;
    ComPtr<ID3D12CommandAllocator> allocator;
    ComPtr<ID3D12GraphicsCommandList> commandList;
    ComPtr<IDMLDevice> dml;
    ComPtr<IDMLCommandRecorder> recorder;
};

Context CreateContext() {
    Context c;
    Check(D3D12CreateDevice(nullptr, D3D_FEATURE_LEVEL_11_0, IID_PPV_ARGS(&c.d3d12)), "D3D12CreateDevice");
    D3D12_COMMAND_QUEUE_DESC queueDesc = {};
    queueDesc.Type = D3D12_COMMAND_LIST_TYPE_DIRECT;
    Check(c.d3d12->CreateCommandQueue(&queueDesc, IID_PPV_ARGS(&c.queue)), "CreateCommandQueue");
    Check(c.d3d12->CreateCommandAllocator(D3D12_COMMAND_LIST_TYPE_DIRECT, IID_PPV_ARGS(&c.allocator)),
          "CreateCommandAllocator");
    Check(c.d3d12->CreateCommandList(0, D3D12_COMMAND_LIST_TYPE_DIRECT, c.allocator.Get(), nullptr,
                                     IID_PPV_ARGS(&c.commandList)), "CreateCommandList");
    Check(DMLCreateDevice(c.d3d12.Get(), DML_CREATE_DEVICE_FLAG_NONE, IID_PPV_ARGS(&c.dml)), "DMLCreateDevice");
    // The training operators need DML_FEATURE_LEVEL_4_1 (BATCH_NORMALIZATION_GRAD needs 3_1)
    decltype(DML_FEATURE_LEVEL_4_1) wanted[] = {DML_FEATURE_LEVEL_4_1};  // a DML_FEATURE_LEVEL array
    DML_FEATURE_QUERY_FEATURE_LEVELS query = {1, wanted};
    DML_FEATURE_DATA_FEATURE_LEVELS levels = {};
    Check(c.dml->CheckFeatureSupport(DML_FEATURE_FEATURE_LEVELS, sizeof(query), &query, sizeof(levels), &levels),
          "CheckFeatureSupport");
    if (levels.MaxSupportedFeatureLevel < DML_FEATURE_LEVEL_4_1) {
        std::fprintf(stderr, "DirectML: feature level 4_1 is not supported by this device/runtime\n");
        std::exit(3);
    }
    Check(c.dml->CreateCommandRecorder(IID_PPV_ARGS(&c.recorder)), "CreateCommandRecorder");
    return c;
}

ComPtr<ID3D12Resource> CreateBuffer(Context &c, UINT64 bytes, D3D12_HEAP_TYPE heapType, D3D12_RESOURCE_STATES state,
                                     D3D12_RESOURCE_FLAGS flags = D3D12_RESOURCE_FLAG_NONE) {
    D3D12_HEAP_PROPERTIES heap = {};
    heap.Type = heapType;
    D3D12_RESOURCE_DESC desc = {};
    desc.Dimension = D3D12_RESOURCE_DIMENSION_BUFFER;
    desc.Width = bytes ? bytes : 4;
    desc.Height = 1;
    desc.DepthOrArraySize = 1;
    desc.MipLevels = 1;
    desc.Format = DXGI_FORMAT_UNKNOWN;
    desc.SampleDesc.Count = 1;
    desc.Layout = D3D12_TEXTURE_LAYOUT_ROW_MAJOR;
    desc.Flags = flags;
    ComPtr<ID3D12Resource> resource;
    Check(c.d3d12->CreateCommittedResource(&heap, D3D12_HEAP_FLAG_NONE, &desc, state, nullptr,
                                           IID_PPV_ARGS(&resource)), "CreateCommittedResource");
    return resource;
}

void Barrier(Context &c, ID3D12Resource *resource, D3D12_RESOURCE_STATES before, D3D12_RESOURCE_STATES after) {
    D3D12_RESOURCE_BARRIER barrier = {};
    barrier.Type = D3D12_RESOURCE_BARRIER_TYPE_TRANSITION;
    barrier.Transition.pResource = resource;
    barrier.Transition.Subresource = D3D12_RESOURCE_BARRIER_ALL_SUBRESOURCES;
    barrier.Transition.StateBefore = before;
    barrier.Transition.StateAfter = after;
    c.commandList->ResourceBarrier(1, &barrier);
}

void CloseExecuteAndWait(Context &c) {
    Check(c.commandList->Close(), "ID3D12GraphicsCommandList::Close");
    ID3D12CommandList *lists[] = {c.commandList.Get()};
    c.queue->ExecuteCommandLists(1, lists);
    ComPtr<ID3D12Fence> fence;
    Check(c.d3d12->CreateFence(0, D3D12_FENCE_FLAG_NONE, IID_PPV_ARGS(&fence)), "CreateFence");
    HANDLE done = CreateEvent(nullptr, FALSE, FALSE, nullptr);
    Check(c.queue->Signal(fence.Get(), 1), "Signal");
    Check(fence->SetEventOnCompletion(1, done), "SetEventOnCompletion");
    WaitForSingleObject(done, INFINITE);
    CloseHandle(done);
    Check(c.d3d12->GetDeviceRemovedReason(), "the D3D12 device");
    Check(c.allocator->Reset(), "ID3D12CommandAllocator::Reset");
    Check(c.commandList->Reset(c.allocator.Get(), nullptr), "ID3D12GraphicsCommandList::Reset");
}

// One operator, from its desc to its results: create, compile, initialize, bind, record, execute, read back.
// Inputs and outputs are in the desc's member order (nullptr: an optional tensor left out).
void Dispatch(Context &c, const DML_OPERATOR_DESC &opDesc, std::vector<const Tensor *> inputs,
              std::vector<Tensor *> outputs) {
    ComPtr<IDMLOperator> op;
    Check(c.dml->CreateOperator(&opDesc, IID_PPV_ARGS(&op)), "IDMLDevice::CreateOperator");
    ComPtr<IDMLCompiledOperator> compiled;
    Check(c.dml->CompileOperator(op.Get(), DML_EXECUTION_FLAG_NONE, IID_PPV_ARGS(&compiled)), "CompileOperator");
    IDMLCompiledOperator *toInitialize[] = {compiled.Get()};
    ComPtr<IDMLOperatorInitializer> initializer;
    Check(c.dml->CreateOperatorInitializer(1, toInitialize, IID_PPV_ARGS(&initializer)), "CreateOperatorInitializer");

    DML_BINDING_PROPERTIES initProps = initializer->GetBindingProperties();
    DML_BINDING_PROPERTIES execProps = compiled->GetBindingProperties();
    UINT descriptors = std::max(initProps.RequiredDescriptorCount, execProps.RequiredDescriptorCount);
    D3D12_DESCRIPTOR_HEAP_DESC heapDesc = {};
    heapDesc.Type = D3D12_DESCRIPTOR_HEAP_TYPE_CBV_SRV_UAV;
    heapDesc.NumDescriptors = std::max(descriptors, 1u);
    heapDesc.Flags = D3D12_DESCRIPTOR_HEAP_FLAG_SHADER_VISIBLE;
    ComPtr<ID3D12DescriptorHeap> heap;
    Check(c.d3d12->CreateDescriptorHeap(&heapDesc, IID_PPV_ARGS(&heap)), "CreateDescriptorHeap");
    ID3D12DescriptorHeap *heaps[] = {heap.Get()};
    c.commandList->SetDescriptorHeaps(1, heaps);

    DML_BINDING_TABLE_DESC tableDesc = {initializer.Get(), heap->GetCPUDescriptorHandleForHeapStart(),
                                        heap->GetGPUDescriptorHandleForHeapStart(), descriptors};
    ComPtr<IDMLBindingTable> table;
    Check(c.dml->CreateBindingTable(&tableDesc, IID_PPV_ARGS(&table)), "CreateBindingTable");
    UINT64 temporaryBytes = std::max(initProps.TemporaryResourceSize, execProps.TemporaryResourceSize);
    ComPtr<ID3D12Resource> temporary, persistent;
    DML_BUFFER_BINDING temporaryBuffer = {}, persistentBuffer = {};
    DML_BINDING_DESC temporaryBinding = {DML_BINDING_TYPE_NONE, nullptr}, persistentBinding = temporaryBinding;
    if (temporaryBytes) {
        temporary = CreateBuffer(c, temporaryBytes, D3D12_HEAP_TYPE_DEFAULT, D3D12_RESOURCE_STATE_UNORDERED_ACCESS,
                                 D3D12_RESOURCE_FLAG_ALLOW_UNORDERED_ACCESS);
        temporaryBuffer = {temporary.Get(), 0, temporaryBytes};
        temporaryBinding = {DML_BINDING_TYPE_BUFFER, &temporaryBuffer};
        table->BindTemporaryResource(&temporaryBinding);
    }
    if (execProps.PersistentResourceSize) {  // the initializer writes it; the operator reads it
        persistent = CreateBuffer(c, execProps.PersistentResourceSize, D3D12_HEAP_TYPE_DEFAULT,
                                  D3D12_RESOURCE_STATE_UNORDERED_ACCESS, D3D12_RESOURCE_FLAG_ALLOW_UNORDERED_ACCESS);
        persistentBuffer = {persistent.Get(), 0, execProps.PersistentResourceSize};
        persistentBinding = {DML_BINDING_TYPE_BUFFER, &persistentBuffer};
        table->BindOutputs(1, &persistentBinding);
    }
    c.recorder->RecordDispatch(c.commandList.Get(), initializer.Get(), table.Get());
    CloseExecuteAndWait(c);

    tableDesc.Dispatchable = compiled.Get();
    tableDesc.SizeInDescriptors = execProps.RequiredDescriptorCount;
    Check(table->Reset(&tableDesc), "IDMLBindingTable::Reset");
    if (temporaryBytes) table->BindTemporaryResource(&temporaryBinding);
    if (execProps.PersistentResourceSize) table->BindPersistentResource(&persistentBinding);
    c.commandList->SetDescriptorHeaps(1, heaps);

    std::vector<ComPtr<ID3D12Resource>> keep;  // upload/readback staging, alive until the fence
    std::vector<DML_BUFFER_BINDING> inputBuffers(inputs.size()), outputBuffers(outputs.size());
    std::vector<DML_BINDING_DESC> inputBindings(inputs.size()), outputBindings(outputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
        if (!inputs[i]) {
            inputBindings[i] = {DML_BINDING_TYPE_NONE, nullptr};
            continue;
        }
        UINT64 bytes = inputs[i]->data.size() * sizeof(float);
        ComPtr<ID3D12Resource> upload =
            CreateBuffer(c, bytes, D3D12_HEAP_TYPE_UPLOAD, D3D12_RESOURCE_STATE_GENERIC_READ);
        ComPtr<ID3D12Resource> gpu = CreateBuffer(c, bytes, D3D12_HEAP_TYPE_DEFAULT, D3D12_RESOURCE_STATE_COPY_DEST,
                                                  D3D12_RESOURCE_FLAG_ALLOW_UNORDERED_ACCESS);
        void *mapped = nullptr;
        Check(upload->Map(0, nullptr, &mapped), "ID3D12Resource::Map");
        std::memcpy(mapped, inputs[i]->data.data(), bytes);
        upload->Unmap(0, nullptr);
        c.commandList->CopyResource(gpu.Get(), upload.Get());
        Barrier(c, gpu.Get(), D3D12_RESOURCE_STATE_COPY_DEST, D3D12_RESOURCE_STATE_UNORDERED_ACCESS);
        inputBuffers[i] = {gpu.Get(), 0, bytes};
        inputBindings[i] = {DML_BINDING_TYPE_BUFFER, &inputBuffers[i]};
        keep.push_back(upload);
        keep.push_back(gpu);
    }
    std::vector<ComPtr<ID3D12Resource>> results(outputs.size()), readbacks(outputs.size());
    for (size_t i = 0; i < outputs.size(); ++i) {
        UINT64 bytes = outputs[i]->data.size() * sizeof(float);
        results[i] = CreateBuffer(c, bytes, D3D12_HEAP_TYPE_DEFAULT, D3D12_RESOURCE_STATE_UNORDERED_ACCESS,
                                  D3D12_RESOURCE_FLAG_ALLOW_UNORDERED_ACCESS);
        readbacks[i] = CreateBuffer(c, bytes, D3D12_HEAP_TYPE_READBACK, D3D12_RESOURCE_STATE_COPY_DEST);
        outputBuffers[i] = {results[i].Get(), 0, bytes};
        outputBindings[i] = {DML_BINDING_TYPE_BUFFER, &outputBuffers[i]};
    }
    table->BindInputs(UINT(inputBindings.size()), inputBindings.data());
    table->BindOutputs(UINT(outputBindings.size()), outputBindings.data());
    c.recorder->RecordDispatch(c.commandList.Get(), compiled.Get(), table.Get());
    for (size_t i = 0; i < outputs.size(); ++i) {
        Barrier(c, results[i].Get(), D3D12_RESOURCE_STATE_UNORDERED_ACCESS, D3D12_RESOURCE_STATE_COPY_SOURCE);
        c.commandList->CopyResource(readbacks[i].Get(), results[i].Get());
    }
    CloseExecuteAndWait(c);
    for (size_t i = 0; i < outputs.size(); ++i) {
        void *mapped = nullptr;
        Check(readbacks[i]->Map(0, nullptr, &mapped), "ID3D12Resource::Map");
        std::memcpy(outputs[i]->data.data(), mapped, outputs[i]->data.size() * sizeof(float));
        readbacks[i]->Unmap(0, nullptr);
    }
}"""


def program(plan: ExportPlan, statements: list[str], writes: list[str], header_values: dict[str, int]) -> str:
    lines = [
        f"// Generated by fbnops export (target directml) from {comment(plan.source or 'an fbnops graph')}.",
        "// NOT BUILT OR RUN BY FBNOPS: " + NOT_HERE + ".",
        "// It is checked structurally, and its call sequence is walked through fbnops' DirectML mirror",
        "// (tests/export/test_directml.py).",
        f"// [seed] {SEED}",
        "// [sample] Microsoft's HelloDirectML (github.com/microsoft/DirectML, Samples/HelloDirectML)",
        "// Reads inputs/*.npy, writes each fetch to outputs/<op>_<index>.npy. DirectML's batch variance is",
        "// biased (population); TF's batch_variance output is Bessel-corrected, so the program converts it.",
    ]
    lines += renamed_comment(plan.renamed())
    lines += ["", "#include <windows.h>", "#include <d3d12.h>", "#include <wrl/client.h>", "",
              "#include <DirectML.h>", "", "#include <algorithm>", "#include <cstdio>", "#include <cstdlib>",
              "#include <cstring>", "#include <map>", "#include <string>", "#include <vector>", "",
              '#include "npy.h"', "", "using Microsoft::WRL::ComPtr;", "",
              "// The DirectML.h values this program was generated against (the DirectML mirror's)"]  # fmt: skip
    lines += [f'static_assert({name} == {value:#x}, "DirectML.h: {name}");' for name, value in header_values.items()]
    lines += ["", "namespace {", "", _PLUMBING, "", "}  // namespace", "", "int main() try {",
              "    Context context = CreateContext();",
              "    std::map<std::string, Tensor> buffers;  // TF tensor name -> host tensor", ""]  # fmt: skip
    lines += ["    " + line for s in statements for line in s.split("\n")]
    lines += ["", *("    " + w for w in writes), "    return 0;", "} catch (const std::exception &e) {",
              '    std::fprintf(stderr, "error: %s\\n", e.what());', "    return 2;", "}", ""]  # fmt: skip
    return "\n".join(lines)


def run_sh() -> str:
    return f"""#!/bin/sh
# DirectML cannot be built or run here: {NOT_HERE}.
cd "$(dirname "$0")"
echo "run.sh: DirectML.h not found: it ships only in the Microsoft.AI.DirectML NuGet package and the \
Windows SDK; build main.cpp on Windows"
exit 3
"""
