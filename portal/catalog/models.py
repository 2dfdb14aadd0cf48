"""The model catalog: serving runtimes and the models the portal can serve (admin-managed)."""

from __future__ import annotations

from decimal import Decimal

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models

from portal.catalog.runtimes import RUNTIMES, RuntimeSpec, ServingChoice
from portal.catalog.sizing import PRECISIONS, ModelShape


class Runtime(models.Model):
    """A serving runtime: which image runs, where it listens, how it is probed."""

    class Slug(models.TextChoices):
        VLLM = "vllm", "vLLM"
        TRITON = "triton", "NVIDIA Triton Inference Server"
        TGI = "tgi", "Text Generation Inference"

    class Api(models.TextChoices):
        OPENAI = "openai", "OpenAI-compatible"
        KSERVE_V2 = "kserve-v2", "KServe v2 inference protocol"

    slug = models.CharField(max_length=20, choices=Slug.choices, unique=True)
    name = models.CharField(max_length=100)
    image = models.CharField(max_length=300, help_text="Container image with tag.")
    port = models.PositiveIntegerField()
    health_path = models.CharField(max_length=200, help_text="Liveness probe path.")
    readiness_path = models.CharField(max_length=200, help_text="Readiness probe path.")
    api = models.CharField(max_length=20, choices=Api.choices)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.name

    def spec(self) -> RuntimeSpec:
        """This row as the pure runtime spec: the row's image, port and probes, the code's rules."""
        base = RUNTIMES[self.slug]
        return RuntimeSpec(
            slug=self.slug,
            name=self.name,
            image=self.image,
            port=self.port,
            health_path=self.health_path,
            readiness_path=self.readiness_path,
            api=self.api,
            max_tensor_parallel=base.max_tensor_parallel,
            precisions=base.precisions,
        )


# Like a slug, but dots allowed: model names carry versions ("llama-3.1-8b-instruct").
slug_with_dots = RegexValidator(
    r"^[a-z0-9][a-z0-9._-]*$", "Lower-case letters, digits, dots, hyphens and underscores."
)


class CatalogModel(models.Model):
    """A model the portal can serve, with the architecture figures sizing needs (config.json)."""

    class Task(models.TextChoices):
        TEXT_GENERATION = "text-generation", "Text generation"
        EMBEDDING = "embedding", "Embedding"
        IMAGE_CLASSIFICATION = "image-classification", "Image classification"

    slug = models.CharField(max_length=100, unique=True, validators=[slug_with_dots])
    name = models.CharField(max_length=150)
    source = models.CharField(
        max_length=300,
        help_text="Hub model id (meta-llama/Llama-3.1-8B-Instruct) or a model repository path.",
    )
    license = models.CharField(max_length=100)
    task = models.CharField(max_length=30, choices=Task.choices)
    parameters = models.DecimalField(
        max_digits=10,
        decimal_places=4,
        validators=[MinValueValidator(Decimal("0.0001"))],
        help_text="Billions of parameters.",
    )
    layers = models.PositiveIntegerField(default=0, help_text="Transformer layers; 0 for other models.")
    attention_heads = models.PositiveIntegerField(default=0)
    kv_heads = models.PositiveIntegerField(default=0, help_text="Key/value heads (grouped-query attention).")
    head_dim = models.PositiveIntegerField(default=0)
    max_context = models.PositiveIntegerField(
        null=True, blank=True, help_text="Tokens; empty for models without a sequence (images)."
    )
    dtypes = models.JSONField(default=list, help_text='e.g. ["bf16", "fp16", "fp8"]')
    quantizations = models.JSONField(default=list, blank=True, help_text='e.g. ["awq-int4", "gptq-int4"]')
    quantized_sources = models.JSONField(
        default=dict,
        blank=True,
        help_text="The checkpoint of each quantization that needs its own, "
        'e.g. {"awq-int4": "hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4"}.',
    )
    default_dtype = models.CharField(max_length=20)
    runtime = models.ForeignKey(Runtime, on_delete=models.PROTECT, related_name="models")
    tags = models.JSONField(default=list, blank=True)
    description = models.TextField(blank=True)
    enabled = models.BooleanField(default=True)
    gated = models.BooleanField(
        default=False,
        help_text="The hub serves its checkpoint (source) only with an access token of an account "
        "that accepted its license: the team's Hugging Face token (Team settings).",
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def needs_token(self, precision: str) -> bool:
        """Whether serving it at `precision` downloads its gated checkpoint (a quantization from a
        checkpoint of its own is another repository)."""
        return self.gated and self.quantized_sources.get(precision, self.source) == self.source

    @property
    def generative(self) -> bool:
        """Only generative models keep a KV cache (see `portal.catalog.sizing`)."""
        return self.task == self.Task.TEXT_GENERATION

    @property
    def parameters_label(self) -> str:
        """Billions of parameters without trailing zeros: "8.03", "0.494", "70.55"."""
        return f"{self.parameters.normalize():f}"

    @property
    def precisions(self) -> list[str]:
        """Everything the sizing and the runtime accept for this model: dtypes, then quantizations."""
        return [*self.dtypes, *(q for q in self.quantizations if q not in self.dtypes)]

    def shape(self) -> ModelShape:
        return ModelShape(
            parameters_b=self.parameters,
            layers=self.layers,
            attention_heads=self.attention_heads,
            kv_heads=self.kv_heads,
            head_dim=self.head_dim,
            generative=self.generative,
            max_tensor_parallel=RUNTIMES[self.runtime.slug].max_tensor_parallel,
        )

    def serving_choice(self, *, precision: str, tensor_parallel: int, context: int) -> ServingChoice:
        return ServingChoice(
            source=self.quantized_sources.get(precision, self.source),
            precision=precision,
            tensor_parallel=tensor_parallel,
            context=context,
            default_dtype=self.default_dtype,
        )

    def clean(self) -> None:
        """Precisions the sizing knows and the runtime serves; the figures sizing needs."""
        errors: dict[str, str] = {}
        for field in ("dtypes", "quantizations", "tags"):
            value = getattr(self, field)
            if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
                errors[field] = "A list of strings."
        if not isinstance(self.quantized_sources, dict):
            errors["quantized_sources"] = "An object of precision -> source."
        if errors:
            raise ValidationError(errors)
        unknown = [p for p in self.precisions if p not in PRECISIONS]
        if unknown:
            errors["dtypes"] = f"Unknown precision {', '.join(unknown)}; known: {', '.join(PRECISIONS)}."
        elif self.runtime_id is not None:
            unserved = [p for p in self.precisions if p not in RUNTIMES[self.runtime.slug].precisions]
            if unserved:
                errors["dtypes"] = f"{self.runtime.name} does not serve {', '.join(unserved)}."
        if not self.dtypes:
            errors["dtypes"] = "At least one dtype."
        if self.default_dtype not in self.dtypes:
            errors["default_dtype"] = "One of the dtypes."
        if self.generative and not (self.layers and self.kv_heads and self.head_dim and self.max_context):
            errors["layers"] = "A text-generation model needs layers, KV heads, head dim and max context."
        if self.kv_heads and self.attention_heads and self.attention_heads % self.kv_heads:
            errors["kv_heads"] = "The attention heads must be a multiple of the KV heads."
        if errors:
            raise ValidationError(errors)
