package perf

// Parameters are the parameter counts, in millions, of the models in the
// shipped profiles and throughput tables, from the published model
// definitions (BERT-base, GPT-2 small, VGG-16, ResNet-50, Inception-v3,
// DeepSpeech2 as in the Pollux/ElasticFlow benchmarks, ResNet-18 for
// cifar10, ResNet-50 on CIFAR-10, NCF, YOLOv3). They size checkpoints for
// migration and reclaim costs; they are estimates, not measurements.
var Parameters = map[string]float64{
	"bert": 110, "gpt2": 124, "vgg16": 138, "resnet50": 25.6, "inception3": 23.8,
	"deepspeech2": 38, "resnet50_cifar10": 23.5, "cifar10": 11.2, "imagenet": 25.6,
	"ncf": 5, "yolov3": 62,
}

// TrainMemGiB is an estimate of the GPU memory each model needs to train at
// the batch sizes of the shipped traces, GiB (weights, optimiser state and
// activations); EdgeFlow offloads a job to an edge server only when it fits.
var TrainMemGiB = map[string]float64{
	"bert": 14, "gpt2": 30, "vgg16": 12, "resnet50": 12, "inception3": 11,
	"deepspeech2": 14, "resnet50_cifar10": 4, "cifar10": 3, "imagenet": 12,
	"ncf": 2, "yolov3": 13,
}

// DefaultCheckpointGiB is the checkpoint size of a model not in Parameters.
const DefaultCheckpointGiB = 1.0

// CheckpointGiB is the size of a training checkpoint of model: its weights
// and two optimiser moments in 32-bit floats (Adam's; SGD with momentum
// keeps one), 12 bytes per parameter.
func CheckpointGiB(model string) float64 {
	p, ok := Parameters[model]
	if !ok {
		return DefaultCheckpointGiB
	}
	return p * 1e6 * 12 / (1 << 30)
}
