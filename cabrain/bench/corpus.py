"""The benchmarks' synthetic text: sentences of 8-40 words from built-in Arabic and English word lists."""

from __future__ import annotations

import random

EN_WORDS = """
deploy release pipeline cache database index query latency server cluster node replica backup
restore migration schema table column partition vector embedding model token prompt agent memory
recall retain namespace grant policy review design decision meeting roadmap budget invoice customer
support ticket incident outage alert metric dashboard monitor log trace error exception timeout retry
queue worker scheduler job batch stream event message topic consumer producer kafka redis postgres
python rust golang kubernetes docker container image registry secret credential token rotation
certificate domain network firewall proxy gateway endpoint route handler request response payload
json yaml config setting flag feature experiment rollout canary staging production sandbox test
unit integration benchmark profile memory cpu gpu disk storage bucket object archive iceberg parquet
team engineer manager product designer analyst client partner vendor contract quarter week month
monday tuesday wednesday thursday friday morning evening cairo alexandria dubai riyadh london berlin
""".split()
AR_WORDS = """
نشر إصدار خط قاعدة بيانات فهرس استعلام زمن خادم عنقود عقدة نسخة احتياطية استعادة ترحيل جدول عمود
قسم متجه نموذج رمز وكيل ذاكرة استرجاع حفظ صلاحية سياسة مراجعة تصميم قرار اجتماع خطة ميزانية فاتورة
عميل دعم تذكرة حادث انقطاع تنبيه مقياس لوحة مراقبة سجل خطأ استثناء مهلة إعادة طابور عامل مجدول مهمة
دفعة رسالة موضوع مستهلك منتج شهادة نطاق شبكة جدار وكيل بوابة نقطة طلب استجابة إعداد ميزة تجربة إطلاق
اختبار وحدة تكامل قياس ملف وحدة معالجة قرص تخزين أرشيف فريق مهندس مدير منتج مصمم محلل شريك مورد عقد
ربع أسبوع شهر الاثنين الثلاثاء الأربعاء الخميس الجمعة صباح مساء القاهرة الإسكندرية دبي الرياض لندن
""".split()
# The proper names among the words (places, tools): the corpus's entities, linked to every memory
# whose text names them, as retain's entity linking would.
ENTITY_NAMES = tuple(
    """
cairo alexandria dubai riyadh london berlin kafka redis postgres python rust golang kubernetes docker
iceberg parquet القاهرة الإسكندرية دبي الرياض لندن
""".split()
)
AGENT = "bench"
NAMESPACE = "bench"


def synthetic_text(rng: random.Random) -> str:
    words = AR_WORDS if rng.random() < 0.5 else EN_WORDS
    length = rng.randint(8, 40)
    return " ".join(rng.choice(words) for _ in range(length)) + f" #{rng.randint(0, 10**6)}"


def synthetic_queries(rng: random.Random, n: int) -> list[str]:
    """Query texts of 3-10 words, drawn like the corpus."""
    return [" ".join(synthetic_text(rng).split()[: rng.randint(3, 10)]) for _ in range(n)]
